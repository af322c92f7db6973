// Owns the JUnit tests of the Java training-run estimate: the shared training_runs.json vectors and the quantile.
package dev.thorsdk.runtime;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * Reproduces tests/vectors/training_runs.json (made by tests/vectors/make_vectors.py from
 * {@code thor_sdk.runtime.training}): every run's step, epoch and run mean, std and upper bound, its
 * step counts and z to 1e-9 relative, every error's class, and the standard normal quantiles of AS 241
 * against Python's {@code statistics.NormalDist().inv_cdf}. Layer lists are read with {@link LayerList}.
 */
public class TrainingRunTest {
    private static final double RTOL = 1e-9;
    /** AS 241 evaluated the same way in both languages: only a last-bit log difference may remain. */
    private static final double ZTOL = 1e-13;

    private static boolean close(double expected, double got, double rtol) {
        return Math.abs(got - expected) <= rtol * Math.abs(expected) + 1e-300;
    }

    private static void close(String what, double expected, double got) {
        assertTrue(what + ": expected " + expected + " got " + got, close(expected, got, RTOL));
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> vectors() throws IOException {
        return (Map<String, Object>) Json.parse(TestVectors.read("training_runs.json"));
    }

    /** Loaded estimators and layer lists by file name (each read once per test). */
    private static final class Files {
        private final Map<String, Estimator> estimators = new HashMap<>();
        private final Map<String, List<Estimator.Layer>> layers = new HashMap<>();

        Estimator estimator(String name) throws IOException {
            Estimator e = estimators.get(name);
            if (e == null) {
                e = Estimator.load(TestVectors.read(name));
                estimators.put(name, e);
            }
            return e;
        }

        List<Estimator.Layer> layers(String name) throws IOException {
            List<Estimator.Layer> l = layers.get(name);
            if (l == null) {
                l = LayerList.parse(TestVectors.read(name)).layers;
                layers.put(name, l);
            }
            return l;
        }
    }

    private static long integer(Object v) {
        double d = (Double) v;
        assertTrue("not an integer: " + d, d == Math.rint(d));
        return (long) d;
    }

    private static TrainingRun run(Files files, Map<String, Object> q) throws IOException {
        Estimator est = files.estimator((String) q.get("estimator"));
        List<Estimator.Layer> layers = files.layers((String) q.get("layers"));
        int batch = (int) integer(q.get("batch_size"));
        if (q.get("samples") == null) {
            return TrainingRun.estimate(est, layers, batch);
        }
        return TrainingRun.estimate(est, layers, batch, integer(q.get("samples")), (int) integer(q.get("epochs")),
                (Double) q.get("confidence"));
    }

    /** Checks one bounded cost to 1e-9 relative; returns the largest relative difference of its three numbers. */
    @SuppressWarnings("unchecked")
    private static double checkBounded(String what, Object expected, TrainingRun.Bounded got) {
        Map<String, Object> e = (Map<String, Object>) expected;
        double[] want = {(Double) e.get("mean"), (Double) e.get("std"), (Double) e.get("upper")};
        double[] have = {got.mean, got.std, got.upper};
        String[] names = {" mean", " std", " upper"};
        double worst = 0.0;
        for (int k = 0; k < 3; k++) {
            close(what + names[k], want[k], have[k]);
            worst = Math.max(worst, Math.abs(have[k] - want[k]) / Math.abs(want[k]));
        }
        return worst;
    }

    @Test
    @SuppressWarnings("unchecked")
    public void reproducesTrainingVectors() throws IOException {
        Map<String, Object> vec = vectors();
        Files files = new Files();
        int runs = 0;
        double worst = 0.0;
        for (Object o : (List<Object>) vec.get("cases")) {
            Map<String, Object> q = (Map<String, Object>) o;
            Map<String, Object> exp = (Map<String, Object>) q.get("expected");
            String what = q.get("estimator") + " " + q.get("layers") + " b=" + q.get("batch_size") + " ("
                    + q.get("what") + ")";
            TrainingRun r = run(files, q);
            assertEquals(what, exp.get("metric"), r.metric);
            assertEquals(what, exp.get("unit"), r.unit);
            assertEquals(what, exp.get("device"), r.device);
            assertEquals(what, exp.get("runtime"), r.runtime);
            assertEquals(what, integer(exp.get("batch_size")), r.batchSize);
            assertEquals(what, integer(exp.get("samples")), r.samples);
            assertEquals(what, integer(exp.get("epochs")), r.epochs);
            assertEquals(what, integer(exp.get("steps_per_epoch")), r.stepsPerEpoch);
            assertEquals(what, integer(exp.get("last_batch")), r.lastBatch);
            assertEquals(what + " steps", (Double) exp.get("steps"), (double) r.steps, 0.0);
            assertEquals(what, (Double) exp.get("confidence"), r.confidence, 0.0);
            assertTrue(what + " z", close((Double) exp.get("z"), r.z, ZTOL));
            worst = Math.max(worst, checkBounded(what + " step", exp.get("step"), r.step));
            worst = Math.max(worst, checkBounded(what + " epoch", exp.get("epoch"), r.epoch));
            worst = Math.max(worst, checkBounded(what + " run", exp.get("run"), r.run));
            runs++;
        }
        int usage = 0;
        int notFound = 0;
        for (Object o : (List<Object>) vec.get("errors")) {
            Map<String, Object> q = (Map<String, Object>) o;
            String want = (String) q.get("error");
            String got;
            String message = "";
            try {
                run(files, q);
                got = "none";
            } catch (Estimator.NotFoundError e) {
                got = "not_found";
            } catch (Estimator.FormatError e) {
                got = "format";
            } catch (Estimator.UsageError e) {
                got = "usage";
                message = e.getMessage();
            }
            assertEquals(q.get("what") + ": " + q.get("message"), want, got);
            if (want.equals("usage")) {
                // the parameter it names ("batch size", "samples", "epochs", "confidence") is the same
                String pyMessage = (String) q.get("message");
                String name = pyMessage.substring(0, pyMessage.indexOf(" must"));
                assertTrue(message + " vs " + pyMessage, message.startsWith(name + " must"));
                usage++;
            } else if (want.equals("not_found")) {
                notFound++;
            }
        }
        System.out.println("TrainingRunTest: " + runs + " runs, " + usage + " usage errors, " + notFound
                + " not-found errors, worst relative difference " + worst);
        assertTrue(runs >= 50);
    }

    @Test
    @SuppressWarnings("unchecked")
    public void quantileIsAs241LikePython() throws IOException {
        Map<String, Object> vec = vectors();
        int n = 0;
        double worst = 0.0;
        for (Object o : (List<Object>) vec.get("quantiles")) {
            Map<String, Object> q = (Map<String, Object>) o;
            double c = (Double) q.get("confidence");
            double want = (Double) q.get("z");
            double got = TrainingRun.quantile(c);
            assertTrue("z(" + c + "): expected " + want + " got " + got, close(want, got, ZTOL));
            if (want != 0.0) {
                worst = Math.max(worst, Math.abs(got - want) / Math.abs(want));
            } else {
                assertEquals(0.0, got, 0.0);
            }
            n++;
        }
        int m = 0;
        for (Object o : (List<Object>) vec.get("ppnd16")) {
            Map<String, Object> q = (Map<String, Object>) o;
            double p = (Double) q.get("p");
            double want = (Double) q.get("z");
            double got = TrainingRun.ppnd16(p);
            assertTrue("ppnd16(" + p + "): expected " + want + " got " + got, close(want, got, ZTOL));
            if (want != 0.0) {
                worst = Math.max(worst, Math.abs(got - want) / Math.abs(want));
            }
            m++;
        }
        System.out.println("TrainingRunTest: " + n + " quantiles, " + m + " ppnd16 points, worst relative difference "
                + worst);
        assertEquals(200, n);
        assertEquals(0.0, TrainingRun.quantile(0.5), 0.0);
        for (double p : new double[] {0.0, 1.0, -0.1, Double.NaN}) {
            try {
                TrainingRun.ppnd16(p);
                fail("ppnd16(" + p + ")");
            } catch (Estimator.UsageError e) {
                assertTrue(e.getMessage(), e.getMessage().contains("(0, 1)"));
            }
        }
    }

    private static void assertUsageError(Runnable r, String fragment) {
        try {
            r.run();
            fail("expected UsageError (" + fragment + ")");
        } catch (Estimator.UsageError e) {
            assertTrue(e.getMessage(), e.getMessage().contains(fragment));
        }
    }

    @Test
    public void epochsCountTheLastPartialBatch() throws IOException {
        Files files = new Files();
        Estimator est = files.estimator("estimator_time_profile.json");
        List<Estimator.Layer> layers = files.layers("layers_time_profile_0.json");
        assertEquals(312L, TrainingRun.stepsPerEpoch(5000, 16)[0]);
        assertEquals(8L, TrainingRun.stepsPerEpoch(5000, 16)[1]);
        assertEquals(0L, TrainingRun.stepsPerEpoch(4992, 16)[1]);
        TrainingRun r = TrainingRun.estimate(est, layers, 16, 5000, 3, 0.95);
        assertEquals(313L, r.stepsPerEpoch);
        assertEquals(8L, r.lastBatch);
        assertEquals(939L, r.steps);
        Estimator.Estimate s16 = est.estimate(layers, 16);
        Estimator.Estimate s8 = est.estimate(layers, 8);
        close("epoch mean", 312 * s16.totalMean + s8.totalMean, r.epoch.mean);
        close("epoch std", 312 * s16.totalStd + s8.totalStd, r.epoch.std);
        close("run mean", 3 * r.epoch.mean, r.run.mean);
        close("run upper", r.run.mean + r.z * r.run.std, r.run.upper);
        TrainingRun one = TrainingRun.estimate(est, layers, 32);
        assertEquals(32L, one.samples);
        assertEquals(1, one.epochs);
        assertEquals(0.95, one.confidence, 0.0);
        assertEquals(one.step.mean, one.run.mean, 0.0);
        TrainingRun few = TrainingRun.estimate(est, layers, 32, 5, 1, 0.5);
        assertEquals(est.estimate(layers, 5).totalMean, few.epoch.mean, 0.0);
        assertEquals(few.run.mean, few.run.upper, 0.0);
    }

    @Test
    public void badInputsAreUsageErrors() throws IOException {
        Files files = new Files();
        Estimator est = files.estimator("estimator_time_profile.json");
        List<Estimator.Layer> layers = files.layers("layers_time_profile_0.json");
        assertUsageError(() -> TrainingRun.estimate(est, layers, 0),
                "batch size must be an integer in [1, 1000000000]");
        assertUsageError(() -> TrainingRun.estimate(est, layers, 8, 0, 1, 0.9), "samples");
        assertUsageError(() -> TrainingRun.estimate(est, layers, 8, 10, 0, 0.9), "epochs");
        assertUsageError(() -> TrainingRun.estimate(est, layers, 8, 10, 1, Double.NaN), "confidence");
        assertUsageError(() -> TrainingRun.estimate(est, layers, 8, 10, 1, 0.3),
                "confidence must be a number in [0.5, 0.9999], got 0.3");
        assertUsageError(() -> TrainingRun.estimate(null, layers, 8, 10, 1, 0.9), "estimator");
        assertUsageError(() -> TrainingRun.estimate(est, null, 8, 10, 1, 0.9), "layers");
    }
}
