package dev.thorsdk.harness.android;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OnnxValue;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import dev.thorsdk.harness.StepRunner;
import dev.thorsdk.runtime.Json;
import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One exported training step (exporters/onnx_train.py) run with ONNX Runtime's Java API, chained:
 * every input has an initializer holding its starting value, so the first step runs with an empty
 * feed; afterwards each state output "NAME.new" is fed back as input "NAME" (the pairs are in the
 * model metadata "thor_sdk.training_step"). The previous step's outputs are closed once the next
 * step has consumed them.
 */
public final class OrtStepRunner implements StepRunner {
    private final OrtSession session;
    private final List<String[]> pairs = new ArrayList<>();
    private OrtSession.Result previous;

    @SuppressWarnings("unchecked")
    public OrtStepRunner(OrtEnvironment env, File model, int threads) throws OrtException {
        OrtSession.SessionOptions opts = new OrtSession.SessionOptions();
        if (threads > 0) {
            opts.setIntraOpNumThreads(threads);
        }
        opts.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
        session = env.createSession(model.getAbsolutePath(), opts);
        String meta = session.getMetadata().getCustomMetadata().get("thor_sdk.training_step");
        if (meta == null) {
            throw new IllegalArgumentException(model + " carries no thor-sdk training-step metadata");
        }
        Map<String, Object> step = (Map<String, Object>) Json.parse(meta);
        for (Object p : (List<Object>) step.get("state_pairs")) {
            List<Object> pair = (List<Object>) p;
            pairs.add(new String[] {(String) pair.get(0), (String) pair.get(1)});
        }
    }

    @Override
    public void step() throws OrtException {
        Map<String, OnnxTensor> feed = new HashMap<>();
        if (previous != null) {
            for (String[] p : pairs) {
                Optional<OnnxValue> v = previous.get(p[0]);
                if (!v.isPresent()) {
                    throw new IllegalStateException("step output " + p[0] + " missing");
                }
                feed.put(p[1], (OnnxTensor) v.get());
            }
        }
        OrtSession.Result next = session.run(feed);
        if (previous != null) {
            previous.close();
        }
        previous = next;
    }

    @Override
    public void close() throws OrtException {
        if (previous != null) {
            previous.close();
            previous = null;
        }
        session.close();
    }
}
