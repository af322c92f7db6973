package dev.thorsdk.runtime;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON parser (RFC 8259) so the runtime needs nothing beyond the JDK.
 *
 * <p>Objects become {@code LinkedHashMap<String, Object>}, arrays {@code ArrayList<Object>}, numbers
 * {@code Double}, strings {@code String}, {@code true/false} {@code Boolean}, {@code null} {@code null}.
 * NaN and Infinity are not JSON and are rejected. Any problem throws {@link Estimator.FormatError}.
 */
public final class Json {
    private static final int MAX_DEPTH = 64;
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** Parses one JSON document (surrounding whitespace allowed). */
    public static Object parse(String text) {
        if (text == null) {
            throw new Estimator.FormatError("JSON text is null");
        }
        Json p = new Json(text);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != p.s.length()) {
            throw p.err("unexpected trailing characters");
        }
        return v;
    }

    private Estimator.FormatError err(String what) {
        return new Estimator.FormatError("not valid JSON: " + what + " at offset " + i);
    }

    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                i++;
            } else {
                break;
            }
        }
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw err("nested too deeply");
        }
        if (i >= s.length()) {
            throw err("unexpected end");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw err("unexpected character '" + c + "'");
        }
    }

    private Object literal(String word, Object v) {
        if (!s.startsWith(word, i)) {
            throw err("unknown literal");
        }
        i += word.length();
        return v;
    }

    /** Consumes one or more digits; "bad number" when there is none. */
    private void digits() {
        int d = i;
        while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
            i++;
        }
        if (i == d) {
            throw err("bad number");
        }
    }

    /** Consumes {@code c} when it is the next character. */
    private boolean eat(char c) {
        if (i < s.length() && s.charAt(i) == c) {
            i++;
            return true;
        }
        return false;
    }

    private Map<String, Object> object(int depth) {
        Map<String, Object> m = new LinkedHashMap<>();
        i++; // {
        ws();
        if (eat('}')) {
            return m;
        }
        while (true) {
            ws();
            if (i >= s.length() || s.charAt(i) != '"') {
                throw err("expected a string key");
            }
            String k = string();
            ws();
            expect(':');
            ws();
            if (m.containsKey(k)) { // as thor_sdk.store.files.read_json: a key twice is a corrupt file, not last-wins
                throw err("key '" + k + "' appears twice in one object");
            }
            m.put(k, value(depth + 1));
            ws();
            if (eat(',')) {
                continue;
            }
            expect('}');
            return m;
        }
    }

    private List<Object> array(int depth) {
        List<Object> a = new ArrayList<>();
        i++; // [
        ws();
        if (eat(']')) {
            return a;
        }
        while (true) {
            ws();
            a.add(value(depth + 1));
            ws();
            if (eat(',')) {
                continue;
            }
            expect(']');
            return a;
        }
    }

    private void expect(char c) {
        if (i >= s.length() || s.charAt(i) != c) {
            throw err("expected '" + c + "'");
        }
        i++;
    }

    private String string() {
        i++; // opening quote
        StringBuilder b = new StringBuilder();
        while (true) {
            if (i >= s.length()) {
                throw err("unterminated string");
            }
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c < 0x20) {
                throw err("control character in string");
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) {
                throw err("unterminated escape");
            }
            char e = s.charAt(i++);
            switch (e) {
                case '"': b.append('"'); break;
                case '\\': b.append('\\'); break;
                case '/': b.append('/'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (i + 4 > s.length()) {
                        throw err("short \\u escape");
                    }
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException ex) {
                        throw err("bad \\u escape");
                    }
                    i += 4;
                    break;
                default:
                    throw err("bad escape \\" + e);
            }
        }
    }

    private Double number() {
        int start = i;
        if (s.charAt(i) == '-') {
            i++;
        }
        if (!eat('0')) { // a leading zero stands alone
            if (i >= s.length() || s.charAt(i) < '1' || s.charAt(i) > '9') {
                throw err("bad number");
            }
            digits();
        }
        if (eat('.')) {
            digits();
        }
        if (eat('e') || eat('E')) {
            if (!eat('+')) {
                eat('-');
            }
            digits();
        }
        double v = Double.parseDouble(s.substring(start, i));
        if (Double.isInfinite(v)) {
            throw err("number out of range");
        }
        return v;
    }
}
