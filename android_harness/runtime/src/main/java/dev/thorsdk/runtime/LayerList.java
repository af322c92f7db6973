// Owns reading the layer-list JSON an app ships beside the estimator (format thor-sdk/layers, version 1) in Java.
package dev.thorsdk.runtime;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's layer list (format {@code thor-sdk/layers}, version 1, schema
 * {@code thor_sdk/schemas/layers.schema.json}, described in {@code docs/layer-list.md}) as
 * {@code thor-sdk layers MODEL --out layers.json} writes it, for Java 17 / Android, JDK only.
 *
 * <p>Checks what the schema says (format, version, a non-empty {@code layers} array, each layer's
 * {@code kind} string, {@code config} of numbers >= 0, optional {@code name}, {@code role},
 * {@code cost}, {@code op} and {@code approx}: a layer marked approx gets a wider std), plus what this runtime needs and {@code --out} always writes: every layer's {@code role}
 * (a layer of kind {@code output} may leave it out) and its {@code cost} terms. It does not know the
 * kinds: a kind the estimator lacks is reported by {@link Estimator#estimate}. Any problem is an
 * {@link Estimator.FormatError} naming the layer.
 *
 * <pre>{@code
 * LayerList list = LayerList.parse(layerListJson);
 * Estimator.Estimate e = est.estimate(list.layers, 32);
 * }</pre>
 */
public final class LayerList {
    public static final String FORMAT = "thor-sdk/layers";
    public static final int VERSION = 1;
    private static final List<String> ROLES = List.of("input", "hidden", "output");

    /** The model's name (null when the file has none). */
    public final String name;
    /** Per-sample input shape (empty when the file has none). */
    public final List<Integer> inputShape;
    /** "float32" (the default) or "int64". */
    public final String inputDtype;
    /** The layers in execution order, each with its role and cost terms. */
    public final List<Estimator.Layer> layers;

    private LayerList(String name, List<Integer> inputShape, String inputDtype, List<Estimator.Layer> layers) {
        this.name = name;
        this.inputShape = inputShape;
        this.inputDtype = inputDtype;
        this.layers = layers;
    }

    private static Estimator.FormatError bad(String what) {
        return new Estimator.FormatError("layer list: " + what);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> object(Object v, String where) {
        if (!(v instanceof Map)) {
            throw bad(where + " must be an object");
        }
        return (Map<String, Object>) v;
    }

    private static String optionalString(Map<String, Object> d, String key, String where) {
        Object v = d.get(key);
        if (v != null && !(v instanceof String)) {
            throw bad(where + key + " must be a string");
        }
        return (String) v;
    }

    /** {@code key -> number} of an object whose values must all be finite numbers >= 0. */
    private static Map<String, Double> numbers(Object v, String where) {
        Map<String, Object> d = object(v, where);
        Map<String, Double> out = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : d.entrySet()) {
            Object x = e.getValue();
            if (!(x instanceof Double) || !((Double) x >= 0.0) || Double.isInfinite((Double) x)) {
                throw bad(where + "." + e.getKey() + " must be a number >= 0, got " + x);
            }
            out.put(e.getKey(), (Double) x);
        }
        return out;
    }

    /** Parses and checks a layer-list JSON text; {@link Estimator.FormatError} on any problem. */
    public static LayerList parse(String json) {
        Map<String, Object> doc = object(Json.parse(json), "top level");
        Object fmt = doc.get("format");
        if (!FORMAT.equals(fmt)) {
            throw new Estimator.FormatError("not a thor-sdk layer list: format is "
                    + (fmt instanceof String ? "'" + fmt + "'" : String.valueOf(fmt)) + ", expected '" + FORMAT + "'");
        }
        Object version = doc.get("version");
        if (!(version instanceof Double) || (Double) version != VERSION) {
            throw new Estimator.FormatError("unsupported layer-list version " + version
                    + "; this runtime reads version " + VERSION);
        }
        String name = optionalString(doc, "name", "");
        List<Integer> shape = new ArrayList<>();
        if (doc.get("input_shape") != null) {
            if (!(doc.get("input_shape") instanceof List)) {
                throw bad("input_shape must be an array of positive integers");
            }
            for (Object s : (List<?>) doc.get("input_shape")) {
                if (!(s instanceof Double) || (Double) s < 1 || (Double) s != Math.rint((Double) s)
                        || (Double) s > Integer.MAX_VALUE) {
                    throw bad("input_shape must be an array of positive integers, got " + s);
                }
                shape.add(((Double) s).intValue());
            }
        }
        String dtype = optionalString(doc, "input_dtype", "");
        if (dtype == null) {
            dtype = "float32";
        } else if (!dtype.equals("float32") && !dtype.equals("int64")) {
            throw bad("input_dtype must be 'float32' or 'int64', got '" + dtype + "'");
        }
        Object ls = doc.get("layers");
        if (!(ls instanceof List) || ((List<?>) ls).isEmpty()) {
            throw bad("layers must be a non-empty array");
        }
        List<?> raw = (List<?>) ls;
        List<Estimator.Layer> layers = new ArrayList<>(raw.size());
        for (int i = 0; i < raw.size(); i++) {
            layers.add(layer(raw.get(i), i));
        }
        return new LayerList(name, Collections.unmodifiableList(shape), dtype, Collections.unmodifiableList(layers));
    }

    private static Estimator.Layer layer(Object o, int i) {
        Map<String, Object> l = object(o, "layer " + i);
        String label = l.get("name") instanceof String ? (String) l.get("name") : String.valueOf(i);
        String where = "layer " + i + " (" + label + ")";
        String name = optionalString(l, "name", where + ": ");
        Object kind = l.get("kind");
        if (!(kind instanceof String)) {
            throw bad(where + ": kind must be a string");
        }
        if (!l.containsKey("config")) {
            throw bad(where + ": lacks field 'config'");
        }
        Map<String, Double> config = numbers(l.get("config"), where + ": config");
        String role = optionalString(l, "role", where + ": ");
        if (role == null && kind.equals("output")) {
            role = "output";
        }
        if (role == null) {
            throw bad(where + ": no role; this runtime needs each layer's role and cost terms as "
                    + "`thor-sdk layers MODEL --out FILE.json` writes them");
        }
        if (!ROLES.contains(role)) {
            throw bad(where + ": role must be 'input', 'hidden' or 'output', got '" + role + "'");
        }
        if (l.get("cost") == null) {
            throw bad(where + ": no cost terms; this runtime needs each layer's \"cost\" ("
                    + String.join(", ", Estimator.TERM_KEYS) + ") as `thor-sdk layers MODEL --out FILE.json` "
                    + "writes them");
        }
        Map<String, Double> terms = numbers(l.get("cost"), where + ": cost");
        Estimator.Cost cost;
        try {
            cost = Estimator.Cost.of(terms);
        } catch (Estimator.UsageError e) {
            throw bad(where + ": " + e.getMessage());
        }
        try {
            cost.checked(where); // launches > 0
        } catch (Estimator.UsageError e) {
            throw bad(e.getMessage());
        }
        String op = optionalString(l, "op", where + ": ");
        String approx = optionalString(l, "approx", where + ": ");
        if ((op != null && op.isEmpty()) || (approx != null && approx.isEmpty())) {
            throw bad(where + ": op and approx must be non-empty strings");
        }
        double recompute = 0.0;
        Object r = l.get("recompute");
        if (r != null) {
            recompute = r instanceof Number ? ((Number) r).doubleValue() : Double.NaN;
            if (!(recompute >= 0.0 && recompute <= 1.0)) {
                throw bad(where + ": recompute must be a number in [0, 1], got " + r);
            }
        }
        return new Estimator.Layer(name != null ? name : String.valueOf(i), (String) kind, role,
                Collections.unmodifiableMap(config), cost, op, approx, recompute);
    }
}
