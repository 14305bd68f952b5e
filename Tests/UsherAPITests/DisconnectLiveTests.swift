import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI

extension OneAtATime {
    /// Clients that die mid-wait keep nothing, over real sockets (issue 14 part 1).
    @Suite(.serialized) struct DisconnectLiveTests {
        private static let config = #"""
            {"queues": {"deploy": {"capacity": 1, "hold_seconds": 60}},
             "pools": {"gpus": {"elements": [{"id": "gpu-0"}]}},
             "pipelines": {"work": {"ack_seconds": 60}}}
            """#

        /// Sends a request and leaves it parked on its connection.
        private func park(_ server: LiveServer, _ method: String, _ path: String, _ body: String) throws
            -> TestHTTPClient
        {
            let client = TestHTTPClient(port: server.port)
            try client.sendRaw(
                Data(
                    "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                        .utf8))
            usleep(100_000)
            return client
        }

        /// Polls `condition` for up to 2 s; the seconds it took, or nil.
        private func within2s(_ condition: () throws -> Bool) rethrows -> Double? {
            let started = Date()
            while Date().timeIntervalSince(started) < 2 {
                if try condition() { return Date().timeIntervalSince(started) }
                usleep(10_000)
            }
            return nil
        }

        @Test func aKilledWaiterLeavesTheLineAndIsNeverGranted() throws {
            let server = try LiveServer(Self.config)
            #expect(
                try server.call("POST", "/v1/queues/deploy/visitors", #"{"id": "holder"}"#).json["status"] as? String
                    == "granted")
            let waiter = try park(server, "POST", "/v1/queues/deploy/visitors?wait=30", #"{"id": "dies"}"#)
            #expect(try server.call("GET", "/v1/queues/deploy/visitors/dies").json["status"] as? String == "waiting")
            waiter.disconnect()
            let took = try within2s {
                try server.call("GET", "/v1/queues/deploy/visitors/dies").json["status"] as? String == "cancelled"
            }
            #expect(took != nil)
            let visitor = try server.call("GET", "/v1/queues/deploy/visitors/dies").json
            #expect(visitor["reason"] as? String == "disconnected")
            // The lock passes over it: the next waiter is granted when the holder completes.
            #expect(
                try server.call("POST", "/v1/queues/deploy/visitors", #"{"id": "next"}"#).json["status"] as? String
                    == "waiting")
            #expect(try server.call("POST", "/v1/queues/deploy/visitors/holder/complete").status == 200)
            #expect(try server.call("GET", "/v1/queues/deploy/visitors/next").json["status"] as? String == "granted")
            #expect(server.server.suspendedRequests == 0)
        }

        @Test func keepLeavesAKilledWaiterInLine() throws {
            let server = try LiveServer(Self.config)
            _ = try server.call("POST", "/v1/queues/deploy/visitors", #"{"id": "holder"}"#)
            let waiter = try park(
                server, "POST", "/v1/queues/deploy/visitors?wait=30&on_disconnect=keep", #"{"id": "stays"}"#)
            waiter.disconnect()
            #expect(within2s { server.server.suspendedRequests == 0 } != nil)
            #expect(try server.call("GET", "/v1/queues/deploy/visitors/stays").json["status"] as? String == "waiting")
        }

        @Test func aKilledFetcherLeavesThePoolsLine() throws {
            let server = try LiveServer(Self.config)
            #expect(try server.call("POST", "/v1/pools/gpus/fetch", "{}").status == 201)
            let fetcher = try park(server, "POST", "/v1/pools/gpus/fetch?wait=30", "{}")
            #expect(server.server.suspendedRequests == 1)
            fetcher.disconnect()
            let withdrawn = try within2s {
                let waiting = try server.call("GET", "/v1/pools/gpus").counts["waiting"] as? Int
                return server.server.suspendedRequests == 0 && waiting == 0
            }
            #expect(withdrawn != nil)
        }

        @Test func anItemPushedAfterAConsumerDiedGoesToALiveOneAsAFirstDelivery() throws {
            let server = try LiveServer(Self.config)
            let consumer = try park(server, "POST", "/v1/pipelines/work/take?wait=30", "")
            #expect(server.server.suspendedRequests == 1)
            consumer.disconnect()
            #expect(within2s { server.server.suspendedRequests == 0 } != nil)
            #expect(try server.call("POST", "/v1/pipelines/work/items", #"{"payload": {"n": 1}}"#).status == 201)
            // The dead consumer's wait may still be parked when the push comes
            // (its cancellation runs in a task of its own): the item is then
            // handed to it, not delivered, and comes back uncounted.
            var taken = try server.call("POST", "/v1/pipelines/work/take")
            _ = try within2s {
                if taken.status == 204 { taken = try server.call("POST", "/v1/pipelines/work/take") }
                return taken.status != 204
            }
            #expect(taken.status == 200)
            let items = try #require(taken.json["items"] as? [[String: Any]])
            #expect(items.count == 1)
            #expect(items.first?["deliveries"] as? Int == 1)
        }

        @Test func manyKilledLongPollsFreeTheirConnectionsAtOnce() throws {
            let server = try LiveServer(Self.config)
            _ = try server.call("POST", "/v1/queues/deploy/visitors", #"{"id": "holder"}"#)
            var clients: [TestHTTPClient] = []
            for i in 0..<200 {
                let client = TestHTTPClient(port: server.port)
                let body = #"{"id": "w\#(i)"}"#
                try client.sendRaw(
                    Data(
                        "POST /v1/queues/deploy/visitors?wait=30 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                            .utf8))
                clients.append(client)
            }
            #expect(within2s { server.server.suspendedRequests == 200 } != nil)
            for client in clients { client.disconnect() }
            let took = try within2s {
                let counts = try server.call("GET", "/v1/queues/deploy").json["counts"] as? [String: Any]
                return server.server.suspendedRequests == 0 && counts?["waiting"] as? Int == 0
            }
            #expect(took != nil)
            let counts = try #require(try server.call("GET", "/v1/queues/deploy").json["counts"] as? [String: Any])
            #expect(counts["cancelled_total"] as? Int == 200)
        }
    }
}
