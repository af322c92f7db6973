package dev.thorsdk.harness;

import java.io.IOException;

/**
 * Raw battery readings in the source's own units: current (uA or mA, either sign convention) and
 * voltage (uV or mV). {@link BatteryPower} decides units and sign per window.
 */
public interface BatteryReader {
    long currentRaw() throws IOException;

    long voltageRaw() throws IOException;

    /** Empty when on battery power, else what shows external power (it hides the draw). */
    String externalPower() throws IOException;
}
