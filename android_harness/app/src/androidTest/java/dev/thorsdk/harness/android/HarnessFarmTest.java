package dev.thorsdk.harness.android;

import android.content.Context;
import android.content.res.AssetManager;
import android.os.Bundle;
import androidx.test.ext.junit.runners.AndroidJUnit4;
import androidx.test.platform.app.InstrumentationRegistry;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import org.junit.Test;
import org.junit.runner.RunWith;

/**
 * The harness as an AndroidJUnitRunner test, for device farms (Firebase Test Lab, AWS Device Farm) that run an
 * app APK plus an instrumentation-test APK and collect files afterwards (docs/device-farms.md).
 *
 * <p>It runs one probe bundle, exactly as {@link HarnessInstrumentation} does over adb, and writes
 * {@code results.json} to the app's external files folder,
 * {@code /sdcard/Android/data/dev.thorsdk.harness/files/thor-results/results.json}, which the farm pulls;
 * {@code thor-sdk harness ingest} reads it back into the campaign. The bundle comes from the runner argument
 * {@code bundle} (a folder already on the phone, e.g. pushed to /sdcard by the farm), else from the folder
 * {@code thor-bundle/} in this test APK's assets (copy a bundle to {@code app/src/androidTest/assets/thor-bundle}
 * before building the test APK). Optional arguments: {@code threads}, {@code allow_charging} (farm phones are
 * usually on USB power, which hides the battery draw: time campaigns are what farms are for).
 *
 * <p>Not compiled here (no Android SDK, no androidx.test): written against androidx.test 1.6 and
 * compileSdk 34, unverified on a device.
 */
@RunWith(AndroidJUnit4.class)
public final class HarnessFarmTest {
    static final String ASSET_BUNDLE = "thor-bundle";
    static final String RESULTS_DIR = "thor-results";

    @Test
    public void runBundle() throws Exception {
        Bundle args = InstrumentationRegistry.getArguments();
        Context target = InstrumentationRegistry.getInstrumentation().getTargetContext();
        Context self = InstrumentationRegistry.getInstrumentation().getContext(); // this test APK: its assets
        String given = args.getString("bundle");
        File bundle;
        if (given != null && !given.isEmpty()) {
            bundle = new File(given);
        } else {
            bundle = new File(target.getFilesDir(), ASSET_BUNDLE);
            deleteTree(bundle);
            copyAssets(self.getAssets(), ASSET_BUNDLE, bundle);
        }
        File outDir = new File(target.getExternalFilesDir(null), RESULTS_DIR);
        if (!outDir.isDirectory() && !outDir.mkdirs()) {
            throw new IOException("cannot create " + outDir);
        }
        File out = new File(outDir, "results.json");
        int threads = Integer.parseInt(args.getString("threads", "0"));
        boolean allowCharging = Boolean.parseBoolean(args.getString("allow_charging", "false"));
        HarnessInstrumentation.runBundle(target, bundle, out, threads, allowCharging);
    }

    /** Copy the asset folder {@code path} (recursively) into {@code dest}. */
    static void copyAssets(AssetManager assets, String path, File dest) throws IOException {
        String[] names = assets.list(path);
        if (names == null || names.length == 0) { // a file (or an empty or missing folder)
            try (InputStream in = assets.open(path); OutputStream o = new FileOutputStream(dest)) {
                byte[] buf = new byte[1 << 16];
                for (int n; (n = in.read(buf)) > 0; ) {
                    o.write(buf, 0, n);
                }
            } catch (java.io.FileNotFoundException e) {
                throw new IOException("no bundle: give -e bundle DIR or put one in the test APK's assets/"
                        + ASSET_BUNDLE, e);
            }
            return;
        }
        if (!dest.isDirectory() && !dest.mkdirs()) {
            throw new IOException("cannot create " + dest);
        }
        for (String n : names) {
            copyAssets(assets, path + "/" + n, new File(dest, n));
        }
    }

    static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) {
            for (File k : kids) {
                deleteTree(k);
            }
        }
        f.delete();
    }
}
