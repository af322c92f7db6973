package dev.thorsdk.harness;

/** Seconds from some origin; injectable so tests run the protocol on a fake clock. */
public interface Clock {
    double nowS();

    /** A monotonic clock (System.nanoTime). */
    Clock MONOTONIC = () -> System.nanoTime() / 1e9;

    /** Wall-clock seconds since the Unix epoch (to align a bench meter's log). */
    Clock WALL = () -> System.currentTimeMillis() / 1e3;
}
