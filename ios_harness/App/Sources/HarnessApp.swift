// thor-sdk iOS harness: launched by the host with
//   xcrun devicectl device process launch --device UDID --terminate-existing dev.thorsdk.harness \
//       --bundle Documents/thor-sdk/run-X/bundle --out Documents/thor-sdk/run-X/results.json
// Paths are inside the app's container (where `devicectl device copy to` put the bundle). The app runs
// the bundle's training steps, records battery level and thermal state per window (iOS gives apps no
// energy counter: energy comes from a bench meter's log on the host), writes results.json atomically
// and exits. Without arguments it shows a one-line status and waits.
import SwiftUI

@main
struct HarnessApp: App {
    @State private var status = "idle: launch me with --bundle PATH --out PATH (see docs/devices.md)"

    init() {
        let args = ProcessInfo.processInfo.arguments
        if let job = LaunchArgs.parse(args) {
            DispatchQueue.global(qos: .userInitiated).async {
                let code = Harness.runAndReport(job)
                exit(code)
            }
        }
    }

    var body: some Scene {
        WindowGroup { Text(status).padding() }
    }
}

struct LaunchArgs {
    let bundle: URL
    let out: URL

    /// `--bundle` and `--out`, relative to the app's container; nothing outside it is accepted.
    static func parse(_ args: [String]) -> LaunchArgs? {
        func value(_ key: String) -> String? {
            guard let i = args.firstIndex(of: key), i + 1 < args.count else { return nil }
            return args[i + 1]
        }
        guard let b = value("--bundle"), let o = value("--out"),
              let bu = Paths.insideContainer(b), let ou = Paths.insideContainer(o) else { return nil }
        return LaunchArgs(bundle: bu, out: ou)
    }
}

enum Paths {
    static var container: URL {
        FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)[0].deletingLastPathComponent()
    }

    /// A path relative to the container; refuses absolute paths and "..".
    static func insideContainer(_ rel: String) -> URL? {
        if rel.isEmpty || rel.hasPrefix("/") || rel.split(separator: "/").contains("..") { return nil }
        return container.appendingPathComponent(rel)
    }
}
