package dev.thorsdk.harness;

import java.util.Arrays;
import java.util.List;

/**
 * Battery discharge power from raw (current, voltage) samples; mirrors thor_sdk.meters.android_battery.
 *
 * <p>Units: |current| median >= 10000 is microamps, else milliamps; voltage median >= 100000 is
 * microvolts, else millivolts (override with "uA"/"mA", "uV"/"mV"). Sign: the kernel documents
 * negative = discharging, Android's BatteryManager says positive = charging, and some vendors invert
 * it; with "auto" the window's median sign is the discharge sign (the harness refuses to measure while
 * charging, so the battery is discharging).
 */
public final class BatteryPower {
    public static final long AUTO_UA_THRESHOLD = 10000;
    public static final long AUTO_UV_THRESHOLD = 100000;

    private BatteryPower() {}

    static double median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        if (n == 0) {
            return 0;
        }
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
    }

    static long[] abs(long[] v) {
        long[] out = new long[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = Math.abs(v[i]);
        }
        return out;
    }

    public static double currentScaleA(long[] raw, String unit) {
        if ("uA".equals(unit)) {
            return 1e-6;
        }
        if ("mA".equals(unit)) {
            return 1e-3;
        }
        if (!"auto".equals(unit)) {
            throw new IllegalArgumentException("current unit must be uA, mA or auto: " + unit);
        }
        long[] nz = Arrays.stream(abs(raw)).filter(x -> x != 0).toArray();
        if (nz.length == 0) {
            return 1e-6;
        }
        return median(nz) >= AUTO_UA_THRESHOLD ? 1e-6 : 1e-3;
    }

    public static double voltageScaleV(long[] raw, String unit) {
        if ("uV".equals(unit)) {
            return 1e-6;
        }
        if ("mV".equals(unit)) {
            return 1e-3;
        }
        if (!"auto".equals(unit)) {
            throw new IllegalArgumentException("voltage unit must be uV, mV or auto: " + unit);
        }
        long[] nz = Arrays.stream(abs(raw)).filter(x -> x != 0).toArray();
        if (nz.length == 0) {
            return 1e-6;
        }
        return median(nz) >= AUTO_UV_THRESHOLD ? 1e-6 : 1e-3;
    }

    public static int dischargeSign(long[] raw, int sign) {
        if (sign == 1 || sign == -1) {
            return sign;
        }
        return median(raw) < 0 ? -1 : 1;
    }

    /** Converts raw samples {t, current, voltage} to (t, watts) in place of a new array. */
    public static double[][] toPower(List<long[]> rawIV, double[] t, String currentUnit, String voltageUnit,
                                     int sign) {
        long[] cur = new long[rawIV.size()];
        long[] vol = new long[rawIV.size()];
        for (int i = 0; i < cur.length; i++) {
            cur[i] = rawIV.get(i)[0];
            vol[i] = rawIV.get(i)[1];
        }
        double a = currentScaleA(cur, currentUnit);
        double v = voltageScaleV(vol, voltageUnit);
        int s = dischargeSign(cur, sign);
        double[][] out = new double[cur.length][2];
        for (int i = 0; i < cur.length; i++) {
            out[i][0] = t[i];
            out[i][1] = (cur[i] * a * s) * (vol[i] * v);
        }
        return out;
    }
}
