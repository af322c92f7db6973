package dev.thorsdk.harness;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;

public class BatteryPowerTest {
    @Rule public TemporaryFolder tmp = new TemporaryFolder();

    static final class FakeClock implements Clock {
        double t = 100.0;

        @Override
        public double nowS() {
            return t;
        }
    }

    private void write(File root, String rel, String v) throws IOException {
        File f = new File(root, rel);
        f.getParentFile().mkdirs();
        Files.write(f.toPath(), (v + "\n").getBytes(StandardCharsets.UTF_8));
    }

    private File pixel() throws IOException {
        File root = tmp.newFolder("pixel");
        write(root, "sys/class/power_supply/battery/status", "Discharging");
        write(root, "sys/class/power_supply/battery/current_now", "-500000");
        write(root, "sys/class/power_supply/battery/voltage_now", "3900000");
        write(root, "sys/class/power_supply/usb/online", "0");
        return root;
    }

    static double power(double t) {
        return 3.0 + 1.2 * Math.sin(t / 5.0) + (t > 15 ? 0.8 : 0.0);
    }

    /** Planted time-varying power through the fake tree; energy within 0.5% of the trapezoid of the planted power. */
    private void plantAndCheck(double curScale, int sign, double voltScale) throws Exception {
        File root = pixel();
        FakeClock clock = new FakeClock();
        BatteryMeter m = new BatteryMeter(new SysfsBattery(root, "battery"), clock, 0.25, false, false,
                "auto", "auto", 0);
        int n = 31;
        double expect = 0;
        for (int k = 0; k < n; k++) {
            double t = k;
            double v = 3.85 + 0.2 * k / (n - 1);
            write(root, "sys/class/power_supply/battery/voltage_now", Long.toString(Math.round(v * voltScale)));
            write(root, "sys/class/power_supply/battery/current_now",
                    Long.toString(Math.round(sign * power(t) / v * curScale)));
            clock.t = 100.0 + t;
            if (k > 0) {
                expect += (power(t) + power(t - 1)) / 2.0;
            }
            if (k == 0) {
                m.start();
            } else if (k < n - 1) {
                m.tick();
            }
        }
        double[] w = m.stop();
        assertEquals(expect, w[0], expect * 0.005);
        assertEquals(30.0, w[1], 1e-9);
    }

    @Test
    public void microampsNegativeDischarge() throws Exception {
        plantAndCheck(1e6, -1, 1e6);
    }

    @Test
    public void milliampsPositiveDischargeMillivolts() throws Exception {
        plantAndCheck(1e3, +1, 1e3);
    }

    @Test
    public void unitDetection() {
        assertEquals(1e-6, BatteryPower.currentScaleA(new long[] {-450000, -520000}, "auto"), 0);
        assertEquals(1e-3, BatteryPower.currentScaleA(new long[] {450, 520}, "auto"), 0);
        assertEquals(1e-6, BatteryPower.currentScaleA(new long[] {450, 520}, "uA"), 0);
        assertEquals(1e-3, BatteryPower.voltageScaleV(new long[] {3900}, "auto"), 0);
        assertEquals(-1, BatteryPower.dischargeSign(new long[] {-3, -2, 5}, 0));
    }

    @Test
    public void refusesWhileCharging() throws Exception {
        File root = pixel();
        write(root, "sys/class/power_supply/battery/status", "Charging");
        write(root, "sys/class/power_supply/usb/online", "1");
        BatteryMeter m = new BatteryMeter(new SysfsBattery(root, "battery"), new FakeClock(), 0.25, false, false,
                "auto", "auto", 0);
        assertTrue(m.whyUnavailable().contains("usb power is online"));
        try {
            m.start();
            fail("measured while charging");
        } catch (IllegalStateException e) {
            assertTrue(e.getMessage().contains("USB power hides the draw"));
        }
    }

    @Test
    public void threadedSamplerSamples() throws Exception {
        File root = pixel();
        BatteryMeter m = new BatteryMeter(new SysfsBattery(root, "battery"), Clock.MONOTONIC, 0.01, true, false,
                "auto", "auto", 0);
        m.start();
        Thread.sleep(100);
        double[] w = m.stop();
        assertEquals(0.5 * 3.9 * w[1], w[0], 1e-9);
        assertTrue(w[1] > 0.05);
    }
}
