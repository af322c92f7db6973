import Foundation
import onnxruntime_objc

/// One exported training step (exporters/onnx_train.py) run with ONNX Runtime, chained: every input has an
/// initializer holding its starting value, so the first step runs with an empty feed; afterwards each
/// output "NAME.new" is fed back as input "NAME" (the exporter's naming convention for state pairs).
final class OrtStepRunner: StepRunner {
    private let session: ORTSession
    private let outputs: Set<String>
    private var feed: [String: ORTValue] = [:]

    init(model: URL) throws {
        let env = try ORTEnv(loggingLevel: .warning)
        let opts = try ORTSessionOptions()
        try opts.setGraphOptimizationLevel(.all)
        session = try ORTSession(env: env, modelPath: model.path, sessionOptions: opts)
        outputs = Set(try session.outputNames())
    }

    func step() throws {
        let out = try session.run(withInputs: feed, outputNames: outputs, runOptions: nil)
        var next: [String: ORTValue] = [:]
        for (name, value) in out where name.hasSuffix(".new") {
            next[String(name.dropLast(4))] = value
        }
        feed = next
    }
}
