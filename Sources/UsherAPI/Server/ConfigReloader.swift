import UsherCore

/// Applies a re-read config file to the running app (SIGHUP). Only the
/// resources the file declares change: new ones are created, changed ones are
/// changed as a `PATCH` would, removed ones are deleted; resources created
/// through the API are left alone. Server keys (`redis` and `default_backend`
/// among them) need a restart and are only reported. A resource's backend
/// cannot change in place: such a declaration fails until the resource is
/// deleted. Resources kept in Redis are created, changed and deleted there,
/// for every instance, in the background (the log says when each is done).
/// A file that does not validate changes nothing.
final class ConfigReloader {
    /// What one reload did, by `kind/name` (and key, for `needsRestart`).
    struct Report: Sendable, Equatable {
        package var created: [String] = []
        var changed: [String] = []
        var deleted: [String] = []
        /// Changed as far as a `PATCH` can; the rest needs re-creating.
        var partlyChanged: [String] = []
        var failed: [String] = []
        /// Kept in Redis: being created, changed or deleted there in the background.
        var inRedis: [String] = []
        /// Server keys whose new value is not in force until a restart.
        var needsRestart: [String] = []
        /// Why the file was refused (nothing changed), or nil.
        var error: String?
    }

    private let app: UsherApp
    /// The declarations last applied: what the next file is compared with.
    private var declared: [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]]

    init(app: UsherApp) {
        self.app = app
        self.declared = app.config.declared
    }

    /// Reads the config with `load` and applies it, logging what changed.
    @discardableResult
    func reload(_ load: () throws(FieldError) -> UsherConfig) -> Report {
        let logger = app.logger
        var report = Report()
        let config: UsherConfig
        let prepared: [(resource: DeclaredResource, before: JSONValue?, after: JSONValue)]
        let newlyDeclared: [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]]
        let shared: [SharedDeclaration]
        do throws(FieldError) {
            config = try load()
            (prepared, newlyDeclared) = try prepare(config)
            shared = try UsherApp.declarations(newlyDeclared, settings: app.config).compactMap {
                if case .shared(let declaration) = $0.1 { declaration } else { nil }
            }
        } catch {
            report.error = error.description
            logger.error("config reload refused; the running config is kept", [("detail", .string(error.description))])
            return report
        }
        report.needsRestart = Self.changedKeys(app.config.fileSettings, config.fileSettings)
        if !report.needsRestart.isEmpty {
            logger.warn(
                "config keys changed that need a restart; not applied",
                [("keys", .array(report.needsRestart.map { .string($0) }))])
        }
        for kind in ResourceKind.allCases {
            let kept = Set((config.declared[kind] ?? []).map(\.name))
            for (name, _, backend) in declared[kind] ?? [] where !kept.contains(name) {
                let fields: [(String, JSONValue)] = [("kind", .string(kind.rawValue)), ("name", .string(name))]
                switch app.deleteUndeclared(kind, name, in: backend) {
                case .deleted:
                    report.deleted.append("\(kind.rawValue)/\(name)")
                    logger.info("declared resource deleted", fields)
                case .inRedis:
                    report.inRedis.append("\(kind.rawValue)/\(name)")
                    logger.info("declared resource being deleted in redis", fields)
                case .absent:
                    break
                }
            }
        }
        for (resource, before, after) in prepared {
            let id = "\(resource.kind.rawValue)/\(resource.name)"
            var fields: [(String, JSONValue)] = [
                ("kind", .string(resource.kind.rawValue)), ("name", .string(resource.name)),
            ]
            if let before, case .object(let old) = before, case .object(let new) = after {
                fields.append(("keys", .array(Self.changedKeys(old, new).map { .string($0) })))
            }
            switch resource.apply(app) {
            case .created:
                report.created.append(id)
                logger.info("declared resource created", fields)
            case .changed:
                report.changed.append(id)
                logger.info("declared resource changed", fields)
            case .unchanged:
                break
            case .partlyChanged(let detail):
                report.partlyChanged.append(id)
                fields.append(("detail", .string(detail)))
                logger.warn("declared resource changed in part", fields)
            case .inRedis:
                report.inRedis.append(id)
                logger.info("declared resource being applied in redis", fields)
            case .failed(let detail):
                report.failed.append(id)
                fields.append(("detail", .string(detail)))
                logger.error("declared resource not applied", fields)
            }
        }
        declared = newlyDeclared
        app.replaceDeclaredShared(shared)
        logger.info(
            "config reloaded",
            [
                ("created", .int(report.created.count)),
                ("changed", .int(report.changed.count + report.partlyChanged.count)),
                ("deleted", .int(report.deleted.count)), ("failed", .int(report.failed.count)),
            ])
        return report
    }

    /// Reads every declaration whose text differs from the last applied one
    /// (all of them are checked first, so a bad one changes nothing), and the
    /// declarations to compare the next file with: the new ones, but the old
    /// one where a backend change is refused.
    private func prepare(_ config: UsherConfig) throws(FieldError) -> (
        [(resource: DeclaredResource, before: JSONValue?, after: JSONValue)],
        [ResourceKind: [(name: String, config: JSONValue, backend: Backend)]]
    ) {
        var prepared: [(resource: DeclaredResource, before: JSONValue?, after: JSONValue)] = []
        var applied = config.declared
        for kind in UsherApp.kinds {
            let before = Dictionary(
                (declared[kind.kind] ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            for (i, (name, value, backend)) in (config.declared[kind.kind] ?? []).enumerated() {
                let old = before[name]
                if let old, old.backend != backend, app.registry.list(kind.kind).contains(where: { $0.name == name }) {
                    let detail =
                        "the backend cannot change in place (\(old.backend.rawValue) to \(backend.rawValue)): "
                        + "delete the resource, then reload"
                    prepared.append(
                        (
                            DeclaredResource(kind: kind.kind, name: name, apply: { _ in .failed(detail) }), old.config,
                            value
                        ))
                    applied[kind.kind]?[i] = old
                    continue
                }
                guard old?.config != value || old?.backend != backend else { continue }
                let path = "\(kind.kind.rawValue).\(name)"
                let resource: DeclaredResource
                switch try kind.prepare(name: name, config: value, backend: backend, path: path, settings: app.config) {
                case .memory(let declared):
                    resource = declared
                case .shared(let declaration):
                    resource = DeclaredResource(kind: kind.kind, name: name) { app in
                        app.declareShared([declaration])
                        return .inRedis
                    }
                }
                prepared.append((resource, old?.config, value))
            }
        }
        return (prepared, applied)
    }

    /// Keys present in either list whose values differ, sorted.
    static func changedKeys(_ old: [(String, JSONValue)], _ new: [(String, JSONValue)]) -> [String] {
        let a = Dictionary(old, uniquingKeysWith: { x, _ in x })
        let b = Dictionary(new, uniquingKeysWith: { x, _ in x })
        return Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }.sorted()
    }
}
