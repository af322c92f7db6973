package dev.thorsdk.harness;

/** One full training step per call (forward, loss, backward, optimizer update); {@code close()} frees it. */
public interface StepRunner {
    void step() throws Exception;

    void close() throws Exception;
}
