import Foundation
import Testing
import UsherAPI

/// Runs the README's "Try it" commands, exactly as written, against the real
/// server with the shipped config, and checks each prints what the README says.
@Suite struct ReadmeExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// (command, expected fragment) pairs from the first ```sh block after `## Try it`.
    static func examples() throws -> [(command: String, expected: String)] {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let section = readme.range(of: "## Try it") else { return [] }
        let rest = readme[section.upperBound...]
        guard let open = rest.range(of: "```sh\n"), let close = rest[open.upperBound...].range(of: "```") else { return [] }
        var pairs: [(String, String)] = []
        var pending: String?
        for line in rest[open.upperBound..<close.lowerBound].split(separator: "\n") {
            if line.hasPrefix("curl ") {
                if let p = pending { pairs.append((p, "")) }
                pending = String(line)
            } else if line.hasPrefix("#=> "), let p = pending {
                pairs.append((p, String(line.dropFirst(4))))
                pending = nil
            }
        }
        if let p = pending { pairs.append((p, "")) }
        return pairs
    }

    @Test func readmeExamplesWork() throws {
        let examples = try Self.examples()
        #expect(examples.count >= 10)
        let config = try String(contentsOf: Self.root.appendingPathComponent("Config/usher.json"), encoding: .utf8)
        let s = try LiveServer(config)
        for (command, expected) in examples {
            let local = command.replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(s.port)")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", local]
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            let output = String(decoding: data, as: UTF8.self)
            #expect(p.terminationStatus == 0, "\(command) exited \(p.terminationStatus)")
            #expect(output.contains(expected), "\(command)\nprinted: \(output)\nexpected: \(expected)")
        }
    }
}
