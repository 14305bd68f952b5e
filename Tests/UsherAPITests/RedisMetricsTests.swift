import Foundation
import Synchronization
import Testing
import UsherCore

@testable import UsherAPI

extension OneAtATime {
    /// `RedisScrape` with stand-in resources, and the exposition of samples that
    /// lack what Redis does not keep (no Redis server here).
    @Suite struct RedisMetricsTests {
        /// A resource that answers after `delay` with `outcome`.
        struct StandIn: RedisMetricsSampled {
            enum Outcome { case sample, gone, missed }
            var name: String
            var outcome = Outcome.sample
            var delay = 0.0
            var calls: Calls?

            final class Calls: Sendable {
                let count = Atomic<Int>(0)
            }

            func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
                calls?.count.add(1, ordering: .relaxed)
                if delay > 0 { try? await Task.sleep(for: .seconds(delay)) }
                switch outcome {
                case .sample:
                    var s = ResourceSample(.queues, name)
                    s.gauges.append(("waiting", 1))
                    return s
                case .gone: return nil
                case .missed: throw SampleMissed()
                }
            }
        }

        @Test func everyAnswerInTimeIsComplete() async {
            let scrape = RedisScrape(timeoutSeconds: 5)
            let outcome = await scrape.sample([
                StandIn(name: "a"), StandIn(name: "b"), StandIn(name: "c", outcome: .gone),
            ])
            #expect(outcome.complete)
            #expect(outcome.samples.map(\.name).sorted() == ["a", "b"])
            #expect(outcome.seconds < 5)
            let none = await scrape.sample([])
            #expect(none.complete && none.samples.isEmpty)
        }

        @Test func aMissedResourceMakesItIncomplete() async {
            let outcome = await RedisScrape(timeoutSeconds: 5).sample([
                StandIn(name: "a"), StandIn(name: "b", outcome: .missed),
            ])
            #expect(!outcome.complete)
            #expect(outcome.samples.map(\.name) == ["a"])
        }

        @Test func theDeadlineEndsTheWaitAndOneSamplingAtATime() async throws {
            let scrape = RedisScrape(timeoutSeconds: 0.1)
            let started = ContinuousClock.now
            let outcome = await scrape.sample([StandIn(name: "fast"), StandIn(name: "slow", delay: 1.5)])
            #expect(ContinuousClock.now - started < .seconds(1))
            #expect(!outcome.complete)
            #expect(outcome.samples.map(\.name) == ["fast"])
            #expect(outcome.seconds >= 0.1)
            // The slow one still runs, past its deadline: the next scrape asks nothing and answers at once.
            let skipped = await scrape.sample([StandIn(name: "fast")])
            #expect(!skipped.complete && skipped.samples.isEmpty && skipped.seconds == 0)
            // Once it has ended, sampling starts again.
            try await Task.sleep(for: .seconds(2))
            let next = await scrape.sample([StandIn(name: "fast")])
            #expect(next.complete && next.samples.map(\.name) == ["fast"])
        }

        @Test func scrapesAtOnceShareOneSampling() async {
            let scrape = RedisScrape(timeoutSeconds: 5)
            let calls = StandIn.Calls()
            let resources = [
                StandIn(name: "a", delay: 0.3, calls: calls), StandIn(name: "b", delay: 0.3, calls: calls),
            ]
            async let first = scrape.sample(resources)
            try? await Task.sleep(for: .milliseconds(50))
            async let second = scrape.sample(resources)
            let (one, two) = await (first, second)
            #expect(one.complete && two.complete)
            #expect(one.samples.map(\.name).sorted() == ["a", "b"])
            #expect(two.samples.map(\.name).sorted() == ["a", "b"])
            #expect(calls.count.load(ordering: .relaxed) == 2)
            // That batch has ended: the next scrape asks again.
            #expect(await scrape.sample(resources).complete)
            #expect(calls.count.load(ordering: .relaxed) == 4)
        }

        @Test func whatRedisDoesNotKeepIsLeftOut() {
            var queue = ResourceSample(.queues, "q")
            queue.gauges.append(("waiting", 2))
            var pipeline = ResourceSample(.pipelines, "p")
            pipeline.oldestKnown = false
            var machine = ResourceSample(.machines, "m")
            machine.machine = ("idle", 3, Timestamp(micros: 0))
            var out = PrometheusText()
            ResourceMetrics.write([queue, pipeline, machine], counts: [:], now: Timestamp(micros: 2_000_000), to: &out)
            let samples = MetricsTests.parse(out.text)
            func has(_ name: String, _ resource: String) -> Bool {
                samples.contains { $0.name == name && $0.labels["name"] == resource }
            }
            #expect(samples.first { $0.name == "usher_queue_waiting" }?.value == 2)
            #expect(has("usher_resource_oldest_waiting_age_seconds", "q"))
            #expect(!has("usher_resource_oldest_waiting_age_seconds", "p"))
            #expect(!samples.contains { $0.name.hasPrefix("usher_resource_wait_seconds") })
            #expect(has("usher_machine_state_age_seconds", "m"))
            #expect(!has("usher_machine_transactions_total", "m"))
            // Each family is still declared once, so the text stays valid.
            #expect(out.text.components(separatedBy: "# TYPE usher_machine_transactions_total counter").count == 2)
        }
    }
}
