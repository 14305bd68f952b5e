import Foundation
import Testing

extension OneAtATime {
    /// Runs every script and transcript of `docs/recipes.md`, exactly as written,
    /// against the real server with the demo config; then the failures each
    /// recipe promises to survive: kills, a full pipeline, a lost lease, a
    /// concurrent writer.
    @Suite struct RecipesTests {
        static let demoConfig: String = {
            let url = ReadmeExamplesTests.root.appendingPathComponent("Config/usher.json")
            return (try? String(contentsOf: url, encoding: .utf8)) ?? "{}"
        }()
        static let sectionTitles = (try? RecipeDocument.load().sections.map(\.title)) ?? []

        /// A server with the demo config and a workspace holding the scripts.
        static func setUp() throws -> (LiveServer, RecipeWorkspace, RecipeDocument) {
            let document = try RecipeDocument.load()
            let server = try LiveServer(demoConfig)
            return (server, try RecipeWorkspace(document, port: server.port), document)
        }

        @Test func everyRecipeIsThereAndLinked() throws {
            let document = try RecipeDocument.load()
            #expect(
                Set(document.scripts.keys)
                    == ["with-lock", "push-job", "worker", "react", "apply-reactions", "with-lease", "player-to"])
            #expect(document.sections.count == 5)
            for section in document.sections {
                #expect(!section.transcripts.isEmpty, "\(section.title) has no transcript")
            }
            let root = ReadmeExamplesTests.root
            let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
            let api = try String(contentsOf: root.appendingPathComponent("docs/api.md"), encoding: .utf8)
            #expect(readme.contains("(docs/recipes.md)"))
            #expect(api.contains("(recipes.md)"))
        }

        /// Clients must not rely on the order of members: the scripts read
        /// answers with jq, or as headers (`Prefer: return=minimal`), never a
        /// member matched in the text.
        @Test func scriptsReadAnswersWithJQ() throws {
            for (name, text) in try RecipeDocument.load().scripts {
                for line in text.split(separator: "\n") where line.contains("grep -o") || line.contains("sed 's/.*\"") {
                    Issue.record("\(name) reads JSON as text: \(line)")
                }
                #expect(
                    text.contains("jq ") || text.contains("return=minimal"),
                    "\(name) reads no answer with jq or headers")
            }
        }

        @Test(arguments: sectionTitles) func transcriptsRunAsWritten(_ title: String) throws {
            let (server, workspace, document) = try Self.setUp()
            defer { withExtendedLifetime(server) {} }
            let section = try #require(document.sections.first { $0.title == title })
            for transcript in section.transcripts {
                for problem in try workspace.run(transcript) { Issue.record(Comment(rawValue: problem)) }
            }
        }

        // MARK: A lock for shell scripts

        @Test func lockIsFreeAfterKills() throws {
            let (server, workspace, _) = try Self.setUp()
            _ = try server.call("PUT", "/v1/queues/migrations", #"{"capacity":1,"hold_seconds":60}"#)
            let holder = try workspace.start("./with-lock migrations sleep 30")
            #expect(until(5) { server.counts("queues/migrations")["holding"] == 1 })

            // A run killed while it waits, the hard way (no trap runs): its
            // curl's connection closes and the server cancels the visitor.
            let waiter = try workspace.start("./with-lock migrations echo never")
            #expect(until(5) { server.counts("queues/migrations")["waiting"] == 1 })
            waiter.signal(SIGKILL, group: true)
            _ = waiter.finish(timeout: 5)
            let id = try #require(waiter.lines.first?.components(separatedBy: " as ").last)
            #expect(until(3) { server.json("queues/migrations/visitors/\(id)")["status"] as? String == "cancelled" })
            #expect(server.json("queues/migrations/visitors/\(id)")["reason"] as? String == "disconnected")

            // The holder killed in the middle of its command (`kill PID`): the
            // trap stops the command (finish waits for it) and frees the slot.
            holder.signal(SIGTERM)
            #expect(holder.finish(timeout: 5) == 143)
            let counts = server.counts("queues/migrations")
            #expect(counts["holding"] == 0 && counts["waiting"] == 0 && counts["released_total"] == 1, "\(counts)")

            let next = try workspace.start("./with-lock migrations echo next")
            #expect(next.finish(timeout: 5) == 0)
            #expect(next.lines.contains("next"), "\(next.lines)")
        }

        // MARK: A worker on a pipeline

        @Test func pushWaitsRetryAfterUntilAWorkerMakesRoom() throws {
            let (server, workspace, _) = try Self.setUp()
            _ = try server.call("PUT", "/v1/pipelines/tiny", #"{"capacity":1}"#)
            let first = try workspace.start(#"./push-job tiny '{"id":"a","payload":{"ok":true}}'"#)
            #expect(first.finish(timeout: 5) == 0)

            let started = Date()
            let producer = try workspace.start(#"./push-job tiny '{"id":"b","payload":{"ok":true}}'"#)
            #expect(until(5) { server.fullRefusals() >= 1 })
            let worker = try workspace.start(#"./worker tiny grep -q '"ok":true'"#)
            #expect(producer.finish(timeout: 10) == 0)
            #expect(Date().timeIntervalSince(started) >= 0.9, "Retry-After is 1 s")
            #expect(producer.lines == ["201 ready"])
            #expect(worker.waitForLines(2, timeout: 5))
            worker.signal(SIGINT, group: true)
            _ = worker.finish(timeout: 5)
            #expect(worker.lines == ["a: done", "b: done"])
        }

        @Test func killedWorkerGivesItsJobBack() throws {
            let (server, workspace, _) = try Self.setUp()
            _ = try server.call("PUT", "/v1/pipelines/slow", #"{"ack_seconds":60}"#)
            _ = try server.call("POST", "/v1/pipelines/slow/items", #"{"id":"long","payload":{}}"#)
            let worker = try workspace.start("./worker slow sh -c 'echo working; exec sleep 30'")
            #expect(worker.waitForLines(1, timeout: 5))
            #expect((server.json("pipelines/slow")["counts"] as? [String: Any])?["in_flight"] as? Int == 1)
            worker.signal(SIGTERM)
            #expect(worker.finish(timeout: 5) == 143)
            let item = server.json("pipelines/slow/items/long")
            #expect(item["status"] as? String == "ready" && item["deliveries"] as? Int == 1, "\(item)")
        }

        @Test func aJobLongerThanItsAckDeadlineKeepsItsDelivery() throws {
            let (server, workspace, _) = try Self.setUp()
            _ = try server.call("PUT", "/v1/pipelines/long", #"{"ack_seconds":2}"#)
            _ = try server.call("POST", "/v1/pipelines/long/items", #"{"id":"j","payload":{}}"#)
            let worker = try workspace.start("EXTEND_EVERY=0.3 ./worker long sleep 3.5")
            #expect(worker.waitForLines(1, timeout: 10))
            worker.signal(SIGINT, group: true)
            _ = worker.finish(timeout: 5)
            #expect(worker.lines == ["j: done"])
            let item = server.json("pipelines/long/items/j")
            #expect(item["status"] as? String == "consumed" && item["deliveries"] as? Int == 1, "\(item)")
            #expect(server.counts("pipelines/long")["redelivered_total"] == 0)
        }

        // MARK: Reactions and an event follower

        @Test func followerAppliesEveryGrant() throws {
            let (server, workspace, _) = try Self.setUp()
            let post: @Sendable (Int) throws -> Void = { n in
                _ = try server.call("POST", "/v1/queues/reactions/visitors", #"{"key":"post-\#(n)","action":"like"}"#)
            }
            // Reactions before the follower starts, while it subscribes, and after.
            for n in 0..<5 { try post(n) }
            let follower = try workspace.start("./apply-reactions")
            for n in 5..<20 {
                try post(n)
                usleep(5000)
            }
            #expect(follower.waitForLines(20, timeout: 10))
            follower.signal(SIGINT, group: true)
            _ = follower.finish(timeout: 5)
            #expect(follower.lines.sorted() == (0..<20).map { "like post-\($0)" }.sorted())
            let counts = server.counts("queues/reactions")
            #expect(counts["completed_total"] == 20 && counts["holding"] == 0 && counts["waiting"] == 0, "\(counts)")
        }

        // MARK: A lease heartbeat

        @Test func lostLeaseStopsTheJob() throws {
            let (server, workspace, _) = try Self.setUp()
            let run = try workspace.start(
                "./with-lease gpus sleep 30", environment: ["LEASE_SECONDS": "1", "RENEW_EVERY": "0.2"])
            #expect(run.waitForLines(1, timeout: 5))
            let element = try #require(run.lines.first?.dropFirst("lease: ".count).split(separator: ",").first)
            let taken = try server.call("DELETE", "/v1/pools/gpus/elements/\(element)?force=true")
            #expect(taken.status == 200)
            #expect(run.finish(timeout: 5) == 1)
            #expect(run.lines.contains { $0.hasPrefix("lease: lost \(element) ") }, "\(run.lines)")
        }

        // MARK: Compare-and-set on a machine

        @Test func staleIfMatchIsReadAgain() throws {
            let (server, workspace, document) = try Self.setUp()
            _ = try server.call("PUT", "/v1/machines/jukebox", #"{"definition":"player"}"#)
            // A curl that lets another client send `prepare` just before the
            // script's first event, between its read and its send.
            let shim = workspace.dir.appendingPathComponent("shim")
            try FileManager.default.createDirectory(at: shim, withIntermediateDirectories: true)
            let curl = try #require(Self.realCurl())
            let script = """
                #!/bin/sh
                case "$*" in
                  *If-Match*) mkdir "$RACED" 2>/dev/null && \(curl) -s -o /dev/null -X POST "$RIVAL" ;;
                esac
                exec \(curl) "$@"

                """
            try script.write(to: shim.appendingPathComponent("curl"), atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes(
                [.posixPermissions: 0o755], ofItemAtPath: shim.appendingPathComponent("curl").path)
            let run = try workspace.start(
                "./player-to jukebox Running",
                environment: [
                    "PATH": shim.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                    "RACED": workspace.dir.appendingPathComponent("raced").path,
                    "RIVAL": "http://127.0.0.1:\(server.port)/v1/machines/jukebox/events/prepare",
                ])
            #expect(run.finish(timeout: 5) == 0)
            let section = try #require(document.sections.first { $0.title.contains("machine") })
            let expected = try #require(section.outputs.first)
            #expect(RecipeDocument.matches(run.lines, expected), "\(run.lines)")
            #expect(server.json("machines/jukebox")["state"] as? String == "Running")
        }

        static func realCurl() -> String? {
            (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
                .map { "\($0)/curl" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
    }
}

extension LiveServer {
    /// `GET /v1/<path>` as a JSON object (empty on any failure).
    func json(_ path: String) -> [String: Any] {
        (try? call("GET", "/v1/\(path)"))?.json ?? [:]
    }

    /// The `counts` of a resource's state.
    func counts(_ path: String) -> [String: Int] {
        json(path)["counts"] as? [String: Int] ?? [:]
    }

    /// Pushes refused with 429 so far, from `/metrics`.
    func fullRefusals() -> Int {
        let metrics = (try? call("GET", "/metrics"))?.text ?? ""
        let prefix = #"usher_http_requests_total{route="/v1/pipelines/{name}/items",method="POST",status="429"} "#
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
            ?? 0
    }
}
