import Foundation
import Locking
import Synchronization
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

/// Samples the Redis-backed resources of one scrape, waiting at most
/// `timeoutSeconds`. Every resource is asked at once, so the connections
/// pipeline the scripts: N resources cost about one round trip. At most one
/// sampling is in flight per process: while the previous one still waits
/// for Redis, a scrape does not start another.
final class RedisScrape: Sendable {
    /// What one scrape got.
    struct Outcome {
        /// The resources that answered in time.
        var samples: [ResourceSample] = []
        /// Every resource answered in time (or is gone).
        var complete = true
        /// From the start of the sampling to its end, or to the deadline.
        var seconds = 0.0
    }

    let timeoutSeconds: Double
    private let inFlight = Atomic<Bool>(false)

    init(timeoutSeconds: Double) {
        self.timeoutSeconds = timeoutSeconds
    }

    func sample(_ resources: [any RedisMetricsSampled]) async -> Outcome {
        guard !resources.isEmpty else { return Outcome() }
        guard inFlight.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return Outcome(complete: false) }
        let started = ContinuousClock.now
        let collected = Collected()
        let finishedInTime = await firstOf(timeoutSeconds) { [self] in
            await withTaskGroup(of: Void.self) { group in
                for resource in resources {
                    group.addTask {
                        do throws(SampleMissed) {
                            collected.add(try await resource.redisMetricsSample())
                        } catch {
                            collected.miss()
                        }
                    }
                }
            }
            inFlight.store(false, ordering: .releasing)
        }
        let elapsed = ContinuousClock.now - started
        let (samples, missed) = collected.taken()
        return Outcome(
            samples: samples, complete: finishedInTime && missed == 0,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// Starts `work` and waits for it at most `seconds`: true when it ended
    /// in time. Past the deadline it goes on alone (its command timeout ends it).
    private func firstOf(_ seconds: Double, _ work: @escaping @Sendable () async -> Void) async -> Bool {
        let once = ResumeOnce()
        return await withCheckedContinuation { continuation in
            once.set(continuation)
            let timer = Task {
                try? await Task.sleep(for: .seconds(seconds))
                once.resume(false)
            }
            Task {
                await work()
                timer.cancel()
                once.resume(true)
            }
        }
    }

    /// The samples gathered so far; read once the deadline has passed.
    private final class Collected: Sendable {
        private let state = Locked<(samples: [ResourceSample], missed: Int)>(([], 0))

        func add(_ sample: ResourceSample?) {
            guard let sample else { return }
            state.withLock { $0.samples.append(sample) }
        }

        func miss() { state.withLock { $0.missed += 1 } }

        func taken() -> (samples: [ResourceSample], missed: Int) {
            state.withLock { state in
                defer { state = ([], 0) }
                return state
            }
        }
    }

    /// A continuation resumed by whichever of two tasks comes first.
    private final class ResumeOnce: Sendable {
        private let continuation = Locked<CheckedContinuation<Bool, Never>?>(nil)

        func set(_ c: CheckedContinuation<Bool, Never>) { continuation.withLock { $0 = c } }

        func resume(_ value: Bool) {
            continuation.withLock { c in
                defer { c = nil }
                return c
            }?.resume(returning: value)
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
        var s = ResourceSample(.pools, name)
        s.gauges += [
            ("size", state.size), ("available", state.available), ("leased", state.leased), ("waiting", state.waiting),
        ]
        s.add(.pool(state.counts))
        s.oldestSince = counts.oldestWaitingSince
        return s
    }
}

extension RedisPipeline: RedisMetricsSampled {
    func redisMetricsSample() async throws(SampleMissed) -> ResourceSample? {
        do throws(PipelineError) {
            let state = try await readState(limit: 0, after: nil).value()
            var s = ResourceSample(.pipelines, name)
            s.gauges += [
                ("capacity", state.capacity), ("ready", state.ready), ("in_flight", state.inFlight),
                ("delayed", state.delayed),
                ("dead", state.dead), ("waiting_consumers", state.waitingConsumers),
                ("waiting_producers", state.waitingProducers), ("paused", state.paused ? 1 : 0),
            ]
            s.add(.pipeline(state.counts))
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
