import Foundation
import Locking
import UsherCore
import UsherRedis

/// Redis did not give a resource's numbers (down, slow, or an unreadable reply).
struct SampleMissed: Error {}

/// A Redis-backed manager that `GET /metrics` can sample: its kind's
/// existing read operations, one or two script calls. Nil when the resource
/// is gone (deleted through another instance).
protocol RedisMetricsSampled: Sendable {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample?
}

/// Samples the Redis-backed resources for scrapes, waiting at most
/// `timeoutSeconds`. Every resource is asked at once, so the connections
/// pipeline the scripts: N resources cost about one round trip. At most one
/// sampling (a batch) is in flight per process: a scrape that comes while
/// one runs shares it (two Prometheus servers scraping at once ask Redis
/// once), and one that comes after that batch's deadline asks nothing.
final class RedisScrape: Sendable {
    /// What one scrape got.
    struct Outcome {
        /// The resources that answered in time.
        var samples: [ResourceSample] = []
        /// Every resource answered in time (or is gone).
        var complete = true
        /// How long the scrape waited for them.
        var seconds = 0.0
    }

    let timeoutSeconds: Double
    private let current = Locked<Batch?>(nil)

    init(timeoutSeconds: Double) {
        self.timeoutSeconds = timeoutSeconds
    }

    func sample(_ resources: [any RedisMetricsSampled]) async -> Outcome {
        guard !resources.isEmpty else { return Outcome() }
        let started = ContinuousClock.now
        let batch = current.withLock { current in
            if let running = current { return running }
            let made = Batch(resources, started: started) { [self] ended in
                self.current.withLock { if $0 === ended { $0 = nil } }
            }
            current = made
            return made
        }
        let remaining = batch.started + .seconds(timeoutSeconds) - started
        guard remaining > .zero else { return Outcome(complete: false) }
        let finishedInTime = await batch.finished(within: remaining)
        let (samples, missed) = batch.collected()
        return Outcome(
            samples: samples, complete: finishedInTime && missed == 0,
            seconds: Self.seconds(ContinuousClock.now - started)
        )
    }

    private static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// One sampling of every resource, and the scrapes waiting for it.
    private final class Batch: Sendable {
        let started: ContinuousClock.Instant
        /// Samples so far, how many resources missed, whether all have answered,
        /// and the scrapes waiting for that.
        private let state = Locked<State>(State())

        private struct State {
            var samples: [ResourceSample] = []
            var missed = 0
            var done = false
            var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
            var nextWaiter = 0
        }

        /// Starts asking every resource; `ended` runs once all have answered.
        init(
            _ resources: [any RedisMetricsSampled], started: ContinuousClock.Instant,
            ended: @escaping @Sendable (Batch) -> Void
        ) {
            self.started = started
            Task { [self] in
                await resources.forEachAtOnce { resource in
                    do throws(SampleMissed) {
                        let sample = try await resource.redisMetricsSample()
                        self.state.withLock { if let sample { $0.samples.append(sample) } }
                    } catch {
                        self.state.withLock { $0.missed += 1 }
                    }
                }
                let waiters = state.withLock { state in
                    state.done = true
                    defer { state.waiters = [:] }
                    return state.waiters
                }
                // Cleared before the scrapes resume: one that comes right after asks again.
                ended(self)
                for waiter in waiters.values { waiter.resume(returning: true) }
            }
        }

        /// What has come so far.
        func collected() -> (samples: [ResourceSample], missed: Int) {
            state.withLock { ($0.samples, $0.missed) }
        }

        /// Waits until every resource has answered (true) or `limit` has passed (false).
        func finished(within limit: Duration) async -> Bool {
            await withCheckedContinuation { continuation in
                let key: Int? = state.withLock { state in
                    guard !state.done else { return nil }
                    state.nextWaiter += 1
                    state.waiters[state.nextWaiter] = continuation
                    return state.nextWaiter
                }
                guard let key else { return continuation.resume(returning: true) }
                Task { [self] in
                    try? await Task.sleep(for: limit)
                    state.withLock { $0.waiters.removeValue(forKey: key) }?.resume(returning: false)
                }
            }
        }
    }
}

extension RedisQueue: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        // Both scripts at once: the connection sends them in one batch.
        async let config = try? await readConfig().value()
        let counts: (counts: QueueCounts, oldestWaitingSince: Timestamp?)
        do throws(QueueError) { counts = try await store.counts() } catch .gone { return nil } catch {
            throw SampleMissed()
        }
        guard let capacity = await config?.capacity else { throw SampleMissed() }
        var s = ResourceSample(.queues, name)
        s.gauges.append(("capacity", capacity))
        s.add(.queue(counts.counts))
        s.oldestSince = counts.oldestWaitingSince
        return s
    }
}

extension RedisWindow: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        do throws(WindowError) {
            let counts = try await store.counts()
            var s = ResourceSample(.windows, name)
            s.add(.window(counts.counts))
            s.oldestSince = counts.oldestWaitingSince
            return s
        } catch .gone {
            return nil
        } catch {
            throw SampleMissed()
        }
    }
}

extension RedisPool: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        // The counts script has the oldest fetcher, the state script the totals: sent in one batch.
        async let counts = try? await store.counts()
        let state: PoolState
        do throws(PoolError) { state = try await store.state(limit: 0) } catch .gone { return nil } catch {
            throw SampleMissed()
        }
        guard let counts = await counts else { throw SampleMissed() }
        var s = ResourceSample(pool: name, state)
        s.oldestSince = counts.oldestWaitingSince
        return s
    }
}

extension RedisPipeline: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        do throws(PipelineError) {
            var s = ResourceSample(pipeline: name, try await readState(limit: 0, after: nil).value())
            s.oldestKnown = false
            return s
        } catch .gone {
            return nil
        } catch {
            throw SampleMissed()
        }
    }
}

extension RedisMachine: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        do throws(MachineError) {
            let snapshot = try await readSnapshot().value()
            var s = ResourceSample(.machines, name)
            s.machine = (snapshot.state, snapshot.version, snapshot.enteredAt)
            return s
        } catch .gone {
            return nil
        } catch {
            throw SampleMissed()
        }
    }
}
