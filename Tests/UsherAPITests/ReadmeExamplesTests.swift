import Foundation
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Runs the curl tour (`docs/tour.md`) and the README's "Try it" commands,
    /// exactly as written, against the real server with the shipped config, and
    /// checks each prints what the document says.
    @Suite struct ReadmeExamplesTests {
        static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()

        /// (command, expected fragment) pairs from every ```sh block of `file`,
        /// or only of its `## section` (up to the next `## ` heading).
        static func examples(_ file: String, section: String? = nil) throws -> [(command: String, expected: String)] {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var part = text[...]
            if let section {
                guard let start = text.range(of: "\n## \(section)\n") else { return [] }
                part = text[start.upperBound...]
                if let next = part.range(of: "\n## ") { part = part[..<next.lowerBound] }
            }
            var pairs: [(String, String)] = []
            var pending: String?
            var inBlock = false
            for line in part.split(separator: "\n", omittingEmptySubsequences: false) {
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

        /// Runs `examples` in order against one fresh server with the demo config.
        static func run(_ examples: [(command: String, expected: String)]) throws {
            let config = try String(contentsOf: root.appendingPathComponent("Config/usher.json"), encoding: .utf8)
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

        /// The tour: every ```sh block of docs/tour.md, in order, on one server.
        @Test func tourExamplesWork() throws {
            let examples = try Self.examples("docs/tour.md")
            #expect(examples.count >= 10)
            try Self.run(examples)
        }

        /// The README's short taste, on a server of its own.
        @Test func readmeExamplesWork() throws {
            let examples = try Self.examples("README.md", section: "Try it")
            #expect(examples.count >= 3)
            try Self.run(examples)
        }
    }
}
