package dev.thorsdk.harness;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Battery energy over a window: samples raw current and voltage every {@code pollS} seconds (on a
 * background thread, or on {@link #tick()} in manual mode for tests) and integrates the discharge
 * power with the trapezoid rule. Refuses to measure on external power unless allowed.
 */
public final class BatteryMeter implements Protocol.Meter {
    private final BatteryReader reader;
    private final Clock clock;
    private final double pollS;
    private final boolean threaded;
    private final boolean allowCharging;
    private final String currentUnit;
    private final String voltageUnit;
    private final int sign;
    /** The fuel gauge's update period: windows must span many of them. */
    public double sensorPeriodS = 1.0;

    private final List<long[]> raw = new ArrayList<>();
    private final List<Double> times = new ArrayList<>();
    private volatile boolean running;
    private Thread thread;
    private volatile Exception error;

    public BatteryMeter(BatteryReader reader, Clock clock, double pollS, boolean threaded, boolean allowCharging,
                        String currentUnit, String voltageUnit, int sign) {
        this.reader = reader;
        this.clock = clock;
        this.pollS = pollS;
        this.threaded = threaded;
        this.allowCharging = allowCharging;
        this.currentUnit = currentUnit;
        this.voltageUnit = voltageUnit;
        this.sign = sign;
    }

    public static BatteryMeter auto(BatteryReader reader) {
        return new BatteryMeter(reader, Clock.MONOTONIC, 0.25, true, false, "auto", "auto", 0);
    }

    @Override
    public double samplePeriodS() {
        return sensorPeriodS;
    }

    /** Empty when the battery can be measured, else why not. */
    public String whyUnavailable() {
        try {
            reader.currentRaw();
            reader.voltageRaw();
            String ext = reader.externalPower();
            if (!allowCharging && !ext.isEmpty()) {
                return "the device is on external power (" + ext + "): USB power hides the draw; unplug it "
                        + "and use adb over Wi-Fi";
            }
        } catch (IOException e) {
            return "battery not readable: " + e.getMessage();
        }
        return "";
    }

    private synchronized void sample() throws IOException {
        long c = reader.currentRaw();
        long v = reader.voltageRaw();
        times.add(clock.nowS());
        raw.add(new long[] {c, v});
    }

    @Override
    public void start() throws Exception {
        String why = whyUnavailable();
        if (!why.isEmpty()) {
            throw new IllegalStateException(why);
        }
        synchronized (this) {
            raw.clear();
            times.clear();
        }
        error = null;
        sample();
        if (threaded) {
            running = true;
            thread = new Thread(() -> {
                while (running) {
                    try {
                        Thread.sleep(Math.max(1L, Math.round(pollS * 1000)));
                        if (running) {
                            sample();
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    } catch (IOException e) {
                        error = e;
                        return;
                    }
                }
            }, "thor-battery-sampler");
            thread.setDaemon(true);
            thread.start();
        }
    }

    /** Manual mode: take one sample now. */
    public void tick() throws IOException {
        sample();
    }

    @Override
    public double[] stop() throws Exception {
        if (threaded && thread != null) {
            running = false;
            thread.interrupt();
            thread.join();
            thread = null;
        }
        if (error != null) {
            throw error;
        }
        sample();
        String ext = reader.externalPower();
        if (!allowCharging && !ext.isEmpty()) {
            throw new IllegalStateException("the device went on external power during the window (" + ext + ")");
        }
        double[] t;
        List<long[]> copy;
        synchronized (this) {
            t = new double[times.size()];
            for (int i = 0; i < t.length; i++) {
                t[i] = times.get(i);
            }
            copy = new ArrayList<>(raw);
        }
        double[][] p = BatteryPower.toPower(copy, t, currentUnit, voltageUnit, sign);
        double e = 0;
        for (int i = 1; i < p.length; i++) {
            e += (p[i][0] - p[i - 1][0]) * (p[i][1] + p[i - 1][1]) / 2.0;
        }
        return new double[] {e, t[t.length - 1] - t[0]};
    }
}
