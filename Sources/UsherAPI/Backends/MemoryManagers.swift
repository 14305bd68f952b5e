import Foundation
import UsherCore

// Each kind's memory manager (an actor of UsherCore) as the lifecycle sees
// it. The lifecycle itself is `MemoryLifecycle`.

extension VisitorQueue: MemoryKindManager {
    static let kind = ResourceKind.queues

    static func make(name: String, config: QueueConfig, in app: UsherApp) -> VisitorQueue {
        VisitorQueue(name: name, config: config, clock: app.clock, events: app.events, budget: app.storage)
    }

    nonisolated func reconcile(to config: QueueConfig) throws(APIError) {
        let patch = QueuePatch(setting: config)
        do throws(QueueError) { _ = try withIsolation { q throws(QueueError) in try q.apply(patch) } } catch {
            throw APIError(error)
        }
    }

    nonisolated func summary() -> JSONValue {
        withIsolation { queue in
            Summary.queue(queue.name, capacity: queue.config.capacity, queue.counts, in: .memory)
        }
    }
}

extension WindowSlot: MemoryKindManager {
    static let kind = ResourceKind.windows

    static func make(name: String, config: WindowConfig, in app: UsherApp) -> WindowSlot {
        WindowSlot(name: name, config: config, clock: app.clock, events: app.events, budget: app.storage)
    }

    nonisolated func reconcile(to config: WindowConfig) throws(APIError) {
        let patch = WindowRoutes.patch(to: config)
        do throws(WindowError) { _ = try withIsolation { w throws(WindowError) in try w.apply(patch) } } catch {
            throw APIError(error)
        }
    }

    nonisolated func summary() -> JSONValue {
        withIsolation { window in
            let showing = (try? window.showing()) ?? nil
            return Summary.window(window.name, showing: showing?.id, queued: window.counts.queued, in: .memory)
        }
    }
}

extension LeasePool: MemoryKindManager {
    static let kind = ResourceKind.pools

    static func make(name: String, config: PoolConfig, in app: UsherApp) -> LeasePool {
        LeasePool(name: name, config: config, clock: app.clock, events: app.events, budget: app.storage)
    }

    nonisolated func reconcile(to config: PoolConfig) throws(APIError) {
        let patch = PoolPatch(config)
        do throws(PoolError) { _ = try withIsolation { p throws(PoolError) in try p.apply(patch) } } catch {
            throw APIError(error)
        }
    }

    nonisolated func summary() -> JSONValue {
        withIsolation { pool in
            let state = try? pool.state(limit: 0)
            return Summary.pool(
                pool.name, size: state?.size ?? 0, maxSize: state.map { $0.config.maxSize(size: $0.size) } ?? 0,
                available: state?.available ?? 0, leased: state?.leased ?? 0, waiting: state?.waiting ?? 0, in: .memory)
        }
    }
}

extension Pipeline: MemoryKindManager {
    static let kind = ResourceKind.pipelines

    /// A file source needs `data_dir` to exist when it is created (its file may come later).
    static func check(_ config: PipelineConfig, in app: UsherApp) throws(APIError) {
        guard case .file = config.source?.kind else { return }
        let dataDir = app.config.dataDir
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dataDir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw APIError.badRequest(
                "data_dir \(dataDir) does not exist or is not a directory: a file source needs it", field: "source.path"
            )
        }
    }

    /// Its source, if any, reads files under `data_dir` and GETs through `HTTPSourceReader`.
    static func make(name: String, config: PipelineConfig, in app: UsherApp) -> Pipeline {
        let settings = app.config
        let maxDepth = settings.jsonLimits.maxDepth
        let factory = PipelineSources.factory(
            dataDir: settings.dataDir, maxLineBytes: settings.maxBodyBytes, maxDepth: maxDepth,
            http: HTTPSourceReader.factory(maxBodyBytes: settings.maxBodyBytes, maxDepth: maxDepth))
        return Pipeline(
            name: name, config: config, clock: app.clock, sourceFactory: factory, events: app.events,
            budget: app.storage, maxTakeBytes: settings.maxResponseBytes)
    }

    nonisolated func reconcile(to config: PipelineConfig) throws(APIError) {
        let patch = PipelinePatch(config: config)
        do throws(PipelineError) { _ = try withIsolation { p throws(PipelineError) in try p.apply(patch) } } catch {
            throw APIError(error)
        }
    }

    nonisolated func summary() -> JSONValue {
        withIsolation { Summary.pipeline($0.state(limit: 0), in: .memory) }
    }
}

extension StateMachine: MemoryKindManager {
    static let kind = ResourceKind.machines

    static func make(name: String, config: MachineSpec, in app: UsherApp) -> StateMachine {
        StateMachine(
            name: name, definitionName: config.definitionName, definition: config.definition, clock: app.clock,
            events: app.events, budget: app.storage)
    }

    nonisolated var config: MachineSpec { MachineSpec(definitionName: definitionName, definition: definition) }

    /// A machine has no `PATCH`: its definition is its identity (`fixedFields` says so).
    nonisolated func reconcile(to config: MachineSpec) throws(APIError) {}

    nonisolated func summary() -> JSONValue {
        let snapshot = withIsolation { $0.snapshot() }
        return Summary.machine(
            name, definitionName: definitionName, definition: definition, state: snapshot.state,
            version: snapshot.version, in: .memory)
    }
}
