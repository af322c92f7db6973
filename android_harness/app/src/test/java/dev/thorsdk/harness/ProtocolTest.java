package dev.thorsdk.harness;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.Test;

public class ProtocolTest {
    static final double IDLE_W = 2.0;

    /** A fake device: a clock, an energy counter that runs at the current power, and a sleeper. */
    static final class Board implements Clock, Sleeper, Protocol.Meter {
        double t = 10.0;
        double energy = 0.0;
        double startT;
        double startE;

        void advance(double dt, double watts) {
            t += dt;
            energy += dt * watts;
        }

        @Override
        public double nowS() {
            return t;
        }

        @Override
        public void sleepS(double s) {
            advance(s, IDLE_W);
        }

        @Override
        public double samplePeriodS() {
            return 0.01;
        }

        @Override
        public void start() {
            startT = t;
            startE = energy;
        }

        @Override
        public double[] stop() {
            return new double[] {energy - startE, t - startT};
        }
    }

    static final class Runner implements StepRunner {
        final Board b;
        final double stepS;
        final double extraW;
        int n;
        int slowStep = -1;
        boolean closed;

        Runner(Board b, double stepS, double extraW) {
            this.b = b;
            this.stepS = stepS;
            this.extraW = extraW;
        }

        @Override
        public void step() {
            n++;
            b.advance(n == slowStep ? 5 * stepS : stepS, IDLE_W + extraW);
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    @Test
    public void idleBaselineGrossAndNet() throws Exception {
        Board b = new Board();
        Map<String, StepRunner> parts = new LinkedHashMap<>();
        parts.put("head", new Runner(b, 0.002, 1.0));
        parts.put("hidden", new Runner(b, 0.005, 3.0));
        Protocol.Settings s = new Protocol.Settings();
        s.minRounds = 4;
        s.maxRounds = 4;
        s.minWindowS = 0.1;
        int[] seq = {0};
        Map<String, Protocol.PartResult> res = new Protocol(s, b, b, b).measure(parts, b, () -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("seq", seq[0]++);
            return m;
        }, "energy", null);
        assertEquals(0.2, s.windowSFor(b), 1e-12);
        double[][] want = {{0.002, 1.0}, {0.005, 3.0}};
        int i = 0;
        for (Protocol.PartResult r : res.values()) {
            assertEquals(IDLE_W, r.idlePowerW, 1e-9);
            assertEquals(4, r.timeS.size());
            assertEquals(4, r.windows.size());
            for (int k = 0; k < 4; k++) {
                assertEquals(want[i][0], r.timeS.get(k), 1e-12);
                assertEquals((IDLE_W + want[i][1]) * want[i][0], r.energyJ.get(k), 1e-9);
                assertEquals(want[i][1] * want[i][0], r.netEnergyJ.get(k), 1e-9);
                Map<String, Object> w = r.windows.get(k);
                assertTrue((Double) w.get("t_end_s") > (Double) w.get("t_start_s"));
            }
            i++;
        }
        assertEquals(9, seq[0]);   // once for the idle check at the start, then once per window (2 x 4)
    }

    @Test
    public void stopsEarlyWhenSteadyAndTimeOnlyHasNoEnergy() throws Exception {
        Board b = new Board();
        Map<String, StepRunner> parts = new LinkedHashMap<>();
        parts.put("head", new Runner(b, 0.01, 1.0));
        Protocol.Settings s = new Protocol.Settings();
        Map<String, Protocol.PartResult> res = new Protocol(s, b, b, b).measure(parts, null, null, "time", null);
        Protocol.PartResult r = res.get("head");
        assertEquals(s.minRounds, r.timeS.size());   // constant step time: CV 0 after min rounds
        assertTrue(r.energyJ.isEmpty());
        assertNull(r.idlePowerW);
        // a window of >= 0.05 s at 0.01 s per step (5 steps, 6 when float rounding lands just above 5)
        assertTrue(r.stepsPerWindow == 5 || r.stepsPerWindow == 6);
    }

    @Test
    public void outliersFlagged() throws Exception {
        assertEquals(Arrays.asList(4), Protocol.outliers(Arrays.asList(1.0, 1.01, 0.99, 1.0, 5.0, 1.02), 3.5));
        Board b = new Board();
        Runner run = new Runner(b, 0.01, 1.0);
        run.slowStep = 30;
        Map<String, StepRunner> parts = new LinkedHashMap<>();
        parts.put("head", run);
        Protocol.Settings s = new Protocol.Settings();
        s.minRounds = 8;
        s.maxRounds = 8;
        s.warmupSteps = 1;
        Map<String, Protocol.PartResult> res = new Protocol(s, b, b, b).measure(parts, null, null, "time", null);
        Map<String, Object> m = res.get("head").toMap(3.5);
        @SuppressWarnings("unchecked")
        Map<String, Object> out = (Map<String, Object>) m.get("outliers");
        assertEquals(1, ((java.util.List<?>) out.get("time")).size());
    }
}
