import Foundation
import Testing

@testable import UsherAPI

/// Runs the README's "Try it" commands, exactly as written, against the real
/// server with the shipped config, and checks each prints what the README says.
@Suite struct ReadmeExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// (command, expected fragment) pairs from every ```sh block of the
    /// `## Try it` section (up to the next `## ` heading).
    static func examples() throws -> [(command: String, expected: String)] {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = readme.range(of: "\n## Try it") else { return [] }
        var section = readme[start.upperBound...]
        if let next = section.range(of: "\n## ") { section = section[..<next.lowerBound] }
        var pairs: [(String, String)] = []
        var pending: String?
        var inBlock = false
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inBlock = line == "```sh"
                continue
            }
            guard inBlock else { continue }
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
