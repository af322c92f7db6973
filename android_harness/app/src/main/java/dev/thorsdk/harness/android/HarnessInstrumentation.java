package dev.thorsdk.harness.android;

import ai.onnxruntime.OrtEnvironment;
import android.app.Activity;
import android.app.Instrumentation;
import android.content.Context;
import android.os.Build;
import android.os.Bundle;
import dev.thorsdk.harness.BatteryMeter;
import dev.thorsdk.harness.Clock;
import dev.thorsdk.harness.Harness;
import dev.thorsdk.harness.Sleeper;
import java.io.File;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Entry point, started by the host over adb:
 *
 * <pre>
 *   am instrument -w -e bundle /data/local/tmp/thor-sdk/run-X/bundle -e out run-X/results.json \
 *       dev.thorsdk.harness/dev.thorsdk.harness.android.HarnessInstrumentation
 * </pre>
 *
 * The bundle is read where adb pushed it (world-readable /data/local/tmp); results go under the app's
 * external files folder (out is relative to it), which adb pulls. Finishes with RESULT_OK, or
 * RESULT_CANCELED and an "error" entry that the host shows. Optional extras: threads (intra-op
 * threads), allow_charging (true to measure on external power).
 */
public final class HarnessInstrumentation extends Instrumentation {
    private Bundle args;

    @Override
    public void onCreate(Bundle arguments) {
        super.onCreate(arguments);
        args = arguments;
        start();
    }

    @Override
    public void onStart() {
        super.onStart();
        Bundle result = new Bundle();
        try {
            Context ctx = getTargetContext();
            File bundle = new File(required("bundle"));
            File outDir = ctx.getExternalFilesDir(null);
            File out = resolveInside(outDir, required("out"));
            int threads = Integer.parseInt(args.getString("threads", "0"));
            boolean allowCharging = Boolean.parseBoolean(args.getString("allow_charging", "false"));
            runBundle(ctx, bundle, out, threads, allowCharging);
            result.putString("results", out.getAbsolutePath());
            finish(Activity.RESULT_OK, result);
        } catch (Exception e) {
            result.putString("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            finish(Activity.RESULT_CANCELED, result);
        }
    }

    /**
     * Run one bundle on this phone and write results.json to out: what both this instrumentation and the
     * device-farm test (androidTest: HarnessFarmTest, under AndroidJUnitRunner) do.
     */
    public static void runBundle(Context ctx, File bundle, File out, int threads, boolean allowCharging)
            throws Exception {
        BatteryMeter meter = new BatteryMeter(new AndroidBattery(ctx), Clock.MONOTONIC, 0.25, true,
                allowCharging, "auto", "auto", 0);
        String why = meter.whyUnavailable();
        Map<String, Object> device = new LinkedHashMap<>();
        device.put("manufacturer", Build.MANUFACTURER);
        device.put("model", Build.MODEL);
        device.put("android_sdk", Build.VERSION.SDK_INT);
        device.put("soc", Build.VERSION.SDK_INT >= 31 ? Build.SOC_MODEL : Build.HARDWARE);
        device.put("meter", why.isEmpty() ? "android-battery" : null);
        device.put("meter_why_unavailable", why.isEmpty() ? null : why);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        new Harness(model -> new OrtStepRunner(env, model, threads), Clock.MONOTONIC, Clock.WALL, Sleeper.REAL)
                .run(bundle, out, why.isEmpty() ? meter : null, new AndroidState(ctx), device);
    }

    private String required(String key) {
        String v = args == null ? null : args.getString(key);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("missing instrumentation argument -e " + key);
        }
        return v;
    }

    /** out must stay inside the app's external files folder. */
    static File resolveInside(File base, String rel) throws IOException {
        File f = new File(base, rel).getCanonicalFile();
        String root = base.getCanonicalPath() + File.separator;
        if (rel.startsWith("/") || !f.getPath().startsWith(root)) {
            throw new IOException("results path leaves the app's folder: " + rel);
        }
        return f;
    }
}
