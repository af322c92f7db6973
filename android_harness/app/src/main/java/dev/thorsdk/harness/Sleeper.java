package dev.thorsdk.harness;

/** Waits; injectable so tests advance a fake clock instead. */
public interface Sleeper {
    void sleepS(double seconds) throws InterruptedException;

    Sleeper REAL = s -> Thread.sleep(Math.max(0L, Math.round(s * 1000.0)));
}
