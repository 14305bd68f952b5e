import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Locking
@testable import UsherCore

extension OneAtATime {
    /// Pull sources: the file reader, path confinement, the low-water pump, back-off.
    @Suite struct PipelineSourceTests {
        let clock = ManualClock()

        /// A fresh directory under the system temp dir, removed by the caller.
        static func makeDataDir() throws -> URL {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
                "usher-pipeline-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            return dir
        }

        static func write(_ text: String, to name: String, in dir: URL) throws {
            try Data(text.utf8).write(to: dir.appendingPathComponent(name))
        }

        func drain(_ source: FileSource) async throws -> (items: [JSONValue], errors: [String]) {
            var items: [JSONValue] = []
            var errors: [String] = []
            while true {
                do {
                    switch try await source.next() {
                    case .item(let v): items.append(v)
                    case .nothing: continue
                    case .exhausted: return (items, errors)
                    }
                } catch let e as SourceRecordError {
                    errors.append(e.message)
                }
            }
        }

        // MARK: - FileSource

        @Test func readsOneValuePerLineSkippingBlankAndBadLines() async throws {
            let dir = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: dir) }
            try Self.write("{\"n\":1}\n\n  \r\nnot json\n[2]\r\n\"three\"\n{\"n\":", to: "in.ndjson", in: dir)
            let source = FileSource(path: "in.ndjson", dataDir: dir.path)
            let (items, errors) = try await drain(source)
            #expect(items == [.object([("n", .int(1))]), .array([.int(2)]), .string("three")])
            #expect(errors.count == 2)
            #expect(errors[0].contains("line 4"))
            #expect(errors[1].contains("line 7"))
            #expect(try await source.next() == .exhausted)
        }

        @Test func anOverlongLineIsSkippedAndCounted() async throws {
            let dir = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: dir) }
            let long = "\"" + String(repeating: "x", count: 300) + "\""
            try Self.write("1\n\(long)\n2\n\(long)", to: "in.ndjson", in: dir)
            let source = FileSource(path: "in.ndjson", dataDir: dir.path, maxLineBytes: 100, chunkBytes: 16)
            let (items, errors) = try await drain(source)
            #expect(items == [.int(1), .int(2)])
            #expect(errors.count == 2 && errors.allSatisfy { $0.contains("longer than 100 bytes") })
            #expect(source.peakBufferedBytes <= 100 + 16 + 16)
        }

        @Test func memoryStaysBoundedOnALargeFile() async throws {
            let dir = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: dir) }
            var text = ""
            text.reserveCapacity(50_000 * 40)
            for i in 0..<50_000 { text += "{\"i\":\(i),\"pad\":\"abcdefghijklmnop\"}\n" }
            try Self.write(text, to: "big.ndjson", in: dir)
            let source = FileSource(path: "big.ndjson", dataDir: dir.path, maxLineBytes: 1024, chunkBytes: 4096)
            var count = 0
            var last: JSONValue?
            while case .item(let v) = try await source.next() {
                count += 1
                last = v
                #expect(source.bufferedBytes <= 1024 + 4096)
            }
            #expect(count == 50_000)
            #expect(last?["i"] == .int(49_999))
            // The file is about 1.8 MB; the buffer never held more than a chunk and a line.
            #expect(text.utf8.count > 1_800_000)
            #expect(source.peakBufferedBytes <= 1024 + 4096)
            #expect(source.bufferedBytes == 0)
        }

        @Test func pathsThatLeaveTheDataDirAreRefused() async throws {
            let root = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: root) }
            let data = root.appendingPathComponent("data")
            let outside = root.appendingPathComponent("data2")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
            try Self.write("1\n", to: "secret.ndjson", in: outside)
            try Self.write("1\n", to: "ok.ndjson", in: outside)
            // A symlink inside data_dir pointing outside; another to a sibling whose name shares the prefix.
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("escape.ndjson").path, withDestinationPath: "/etc/passwd")
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("sibling.ndjson").path,
                withDestinationPath: outside.appendingPathComponent("secret.ndjson").path)
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("dir").path, withDestinationPath: outside.path)
            // A symlink that stays inside is fine.
            try Self.write("7\n", to: "real.ndjson", in: data)
            try FileManager.default.createSymbolicLink(
                atPath: data.appendingPathComponent("alias.ndjson").path, withDestinationPath: "real.ndjson")

            for path in ["../data2/secret.ndjson", "/etc/passwd", "escape.ndjson", "sibling.ndjson", "dir/ok.ndjson"] {
                #expect(throws: SourceError.self, "\(path)") { try FileSource.resolve(path: path, dataDir: data.path) }
                let source = FileSource(path: path, dataDir: data.path)
                await #expect(throws: SourceError.self, "\(path)") { try await source.next() }
            }
            #expect(try await FileSource(path: "alias.ndjson", dataDir: data.path).next() == .item(.int(7)))
        }

        @Test func aMissingFileIsAnErrorUntilItAppears() async throws {
            let dir = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: dir) }
            let source = FileSource(path: "later.ndjson", dataDir: dir.path)
            await #expect(throws: SourceError.self) { try await source.next() }
            try Self.write("5\n", to: "later.ndjson", in: dir)
            #expect(try await source.next() == .item(.int(5)))
        }

        // MARK: - The pump

        @Test func theFileSourceKeepsLowWaterItemsReady() async throws {
            let dir = try Self.makeDataDir()
            defer { try? FileManager.default.removeItem(at: dir) }
            try Self.write(
                (1...10).map { "{\"n\":\($0)}" }.joined(separator: "\n") + "\nbad\n", to: "gifts.ndjson", in: dir)
            let config = PipelineConfig(
                capacity: 100, maxInFlight: 100,
                source: PipelineSourceConfig(kind: .file(path: "gifts.ndjson"), lowWater: 3))
            let p = Pipeline(
                name: "gifts", config: config, clock: clock, sourceFactory: PipelineSources.factory(dataDir: dir.path))
            await PipelineFixtures.eventually { await p.state().ready == 3 }
            // It stops at the low-water mark: the rest of the file stays on disk.
            #expect(await p.state().source?.pulledTotal == 3)

            let first = try await p.take(max: 2)
            #expect(first.map { $0.payload["n"] } == [.int(1), .int(2)])
            await PipelineFixtures.eventually { await p.state().ready == 3 }
            #expect(await p.state().source?.pulledTotal == 5)

            var seen = first.count
            while seen < 10 {
                let got = try await p.takeWaiting(max: 100, until: clock.now().adding(seconds: 30))
                seen += got.count
            }
            await PipelineFixtures.eventually { await p.state().source?.exhausted == true }
            let status = try #require(await p.state().source)
            #expect(status.pulledTotal == 10 && status.errorsTotal == 1)
            #expect(status.lastError?.contains("line 11") == true)
            #expect(status.config.kind == .file(path: "gifts.ndjson"))
            #expect(await p.state().counts.pushedTotal == 10)
        }

        @Test func aParkedConsumerIsWokenByASourcePull() async throws {
            let reader = ScriptedReader([.nothing, .item(.string("late"))])
            let config = PipelineConfig(source: PipelineSourceConfig(kind: .http(url: "http://127.0.0.1:1/next")))
            let p = Pipeline(name: "p", config: config, clock: clock, sourceFactory: { _ in reader })
            let consumer = Task { try await p.takeWaiting(max: 1, until: clock.now().adding(seconds: 30)) }
            await PipelineFixtures.eventually { await p.state().source?.nextRetryAt != nil }
            await PipelineFixtures.eventually { await p.waitingConsumers == 1 }
            clock.advance(by: 0.1)
            let got = try await consumer.value
            #expect(got.map(\.payload) == [.string("late")])
        }

        @Test func backOffDoublesOnNothingAndResetsOnAnItem() async throws {
            let reader = ScriptedReader(Array(repeating: .nothing, count: 8) + [.item(.int(1)), .nothing])
            let config = PipelineConfig(source: PipelineSourceConfig(kind: .http(url: "http://127.0.0.1:1/next")))
            let p = Pipeline(name: "p", config: config, clock: clock, sourceFactory: { _ in reader })
            var delays: [Double] = []
            for pull in 1...8 {
                await PipelineFixtures.eventually {
                    let retry = await p.state().source?.nextRetryAt
                    return reader.pulls == pull && retry != nil
                }
                let retry = try #require(await p.state().source?.nextRetryAt)
                let wait = clock.now().seconds(until: retry)
                delays.append(wait)
                clock.advance(by: wait)
            }
            #expect(delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5])
            await PipelineFixtures.eventually { await p.state().ready == 1 }
            _ = try await p.take(max: 1)
            // After an item the next empty pull backs off from the start again.
            await PipelineFixtures.eventually {
                let retry = await p.state().source?.nextRetryAt
                return reader.pulls == 10 && retry != nil
            }
            let retry = try #require(await p.state().source?.nextRetryAt)
            #expect(clock.now().seconds(until: retry) == 0.1)
        }

        @Test func errorsAreCountedAndNeverFatal() async throws {
            let reader = ScriptedReader([.item(.int(1))], failFirst: 2)
            let config = PipelineConfig(source: PipelineSourceConfig(kind: .http(url: "http://127.0.0.1:1/next")))
            let p = Pipeline(name: "p", config: config, clock: clock, sourceFactory: { _ in reader })
            await PipelineFixtures.eventually { await p.state().source?.errorsTotal == 1 }
            clock.advance(by: 0.1)
            await PipelineFixtures.eventually { await p.state().source?.errorsTotal == 2 }
            #expect(await p.state().source?.lastError == "connection refused")
            clock.advance(by: 0.2)
            await PipelineFixtures.eventually { await p.state().ready == 1 }
        }

        @Test func aFactoryFailureIsRetriedAfterABackOff() async throws {
            let attempts = Atomic<Int>(0)
            let config = PipelineConfig(source: PipelineSourceConfig(kind: .http(url: "http://127.0.0.1:1/next")))
            let p = Pipeline(
                name: "p", config: config, clock: clock,
                sourceFactory: { _ in
                    if attempts.add(1, ordering: .relaxed).newValue == 1 { throw SourceError(message: "not yet") }
                    return ScriptedReader([.item(.int(9))])
                })
            #expect(await p.state().source?.lastError == "not yet")
            clock.advance(by: 0.1)
            await PipelineFixtures.eventually { await p.state().ready == 1 }
        }

        @Test func closingStopsTheSource() async throws {
            let reader = ScriptedReader([.nothing, .item(.int(1))])
            let config = PipelineConfig(source: PipelineSourceConfig(kind: .http(url: "http://127.0.0.1:1/next")))
            let p = Pipeline(name: "p", config: config, clock: clock, sourceFactory: { _ in reader })
            await PipelineFixtures.eventually { await p.state().source?.nextRetryAt != nil }
            await p.close()
            #expect(clock.pendingCount == 0)
            clock.advance(by: 1)
            #expect(reader.pulls == 1)
        }
    }
}

/// A reader that answers from a script, then `.nothing` for ever.
final class ScriptedReader: PipelineSourceReader {
    private let state: Locked<(script: [SourcePull], failures: Int, pulls: Int)>

    init(_ script: [SourcePull], failFirst failures: Int = 0) {
        state = Locked((script, failures, 0))
    }

    var pulls: Int { state.withLock { $0.pulls } }

    func next() async throws -> SourcePull {
        let (answer, fail): (SourcePull, Bool) = state.withLock { s in
            s.pulls += 1
            if s.failures > 0 {
                s.failures -= 1
                return (.nothing, true)
            }
            return (s.script.isEmpty ? .nothing : s.script.removeFirst(), false)
        }
        if fail { throw SourceError(message: "connection refused") }
        return answer
    }
}
