import Foundation
import HTTPTestClient
import Testing

@testable import UsherAPI
@testable import UsherCore

/// Keeps `GET /openapi.json` true to the server: the same routes, every
/// reference resolved, every problem code known. `scripts/openapi-check`
/// validates the document and fuzzes a live server against it.
@Suite struct OpenAPITests {
    /// `"METHOD /template"` for every operation of the document.
    static func documentedRoutes() -> [String] {
        guard case .object(let paths)? = OpenAPIDocument.json["paths"] else { return [] }
        return paths.flatMap { template, item -> [String] in
            guard case .object(let members) = item else { return [] }
            return members.map(\.0).filter { $0 != "parameters" }.map { "\($0.uppercased()) \(template)" }
        }
    }

    @Test func everyRouteIsDocumentedAndNothingElse() throws {
        let app = try UsherApp(config: UsherConfig())
        let served = app.router.routes.map { "\($0.method) \($0.template)" }
        let documented = Self.documentedRoutes()
        #expect(Set(served).subtracting(documented).sorted() == [], "served, not documented")
        #expect(Set(documented).subtracting(served).sorted() == [], "documented, not served")
        #expect(documented.count == Set(documented).count)
        #expect(served.count > 50)
    }

    @Test func pathParametersMatchTheirTemplates() {
        for path in OpenAPIDocument.paths {
            let inTemplate = path.template.split(separator: "/")
                .filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
            let declared = path.parameters.compactMap { p -> String? in
                guard case .string(let name)? = p["name"], p["in"] == .string("path") else { return nil }
                return name
            }
            #expect(inTemplate == declared, "\(path.template)")
            for parameter in path.parameters {
                #expect(
                    parameter["schema"]?["pattern"] == .string(OpenAPIDocument.Schema.namePattern), "\(path.template)")
            }
        }
    }

    @Test func operationIDsAreUnique() {
        let ids = OpenAPIDocument.paths.flatMap { $0.operations.map(\.id) }
        #expect(ids.count == Set(ids).count)
    }

    @Test func everyReferenceResolvesAndEveryComponentIsUsed() {
        var refs: Set<String> = []
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let members):
                for (key, member) in members {
                    if key == "$ref", case .string(let ref) = member { refs.insert(ref) } else { walk(member) }
                }
            case .array(let elements): elements.forEach(walk)
            default: break
            }
        }
        walk(OpenAPIDocument.json)
        var defined: [String] = []
        for section in ["schemas", "responses"] {
            guard case .object(let members)? = OpenAPIDocument.json["components"]?[section] else {
                Issue.record("no components.\(section)")
                return
            }
            defined += members.map { "#/components/\(section)/\($0.0)" }
        }
        #expect(refs.subtracting(defined).sorted() == [], "unresolved")
        #expect(Set(defined).subtracting(refs).sorted() == [], "unused")
        #expect(defined.count == Set(defined).count, "defined twice")
    }

    /// Every code the error table can answer with is in the Problem enum,
    /// and every code an operation names is one of them.
    @Test func problemCodesCoverTheErrorTable() throws {
        var errors: [APIError] = [
            .badRequest("x"), .unauthorized(), .notFound("x"), .methodNotAllowed("PATCH", allowed: ["GET"]),
            .alreadyExists("queue", "q"), .gone("x"), .preconditionFailed("x"), .payloadTooLarge(limit: 1),
            .shuttingDown(), .internalError("x"), .originNotAllowed("x"), .hostNotAllowed("x"), .notImplemented("x"),
            .uriTooLong("x"), .headerFieldsTooLarge("x"),
            APIError(QueueError.notGranted(current: .waiting)), APIError(QueueError.full(retryAfterSeconds: 1)),
            APIError(MachineError.unknownEvent(allowedEvents: [])),
            APIError(MachineError.invalidTransition(state: "A", allowedEvents: [])),
            APIError(MachineError.versionMismatch(current: 1)),
            APIError(PipelineError.notInFlight(current: "ready")), APIError(PipelineError.inFlight),
            APIError(PipelineError.full(retryAfterSeconds: 1)),
            APIError(WindowError.nothingShowing), APIError(WindowError.full(retryAfterSeconds: 1)),
            APIError(PoolError.exhausted(nextExpiryAt: nil)), APIError(PoolError.notLeased("x", status: nil)),
            APIError(PoolError.elementLeased(element: "e", lease: "l")), APIError(PoolError.full(retryAfterSeconds: 1)),
            APIError(PoolError.tooManyElements(limit: 1)), APIError.tooManySubscribers(limit: 1),
            APIError(QueueError.storageFull(StorageFull(used: 1, limit: 2, requested: 3))),
        ]
        do throws(APIError) {
            _ = try Registry(maxResources: 0).create(
                .queues, "q", make: { VisitorQueue(name: "q", config: QueueConfig(), clock: SystemClock()) },
                matches: { _ in true })
        } catch {
            errors.append(error)
        }
        let known = Set(OpenAPIDocument.problemCodes)
        for error in errors {
            #expect(known.contains(error.code), "\(error.code) is not in the Problem schema")
            #expect(
                (try? JSONValue.parse(Data(error.response.body)))?["type"] == .string("urn:usher:error:\(error.code)"))
        }
        #expect(errors.contains { $0.code == "too_many_resources" })

        var named: Set<String> = []
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let members):
                if case .object(let code)? = value["properties"]?["code"],
                    case .array(let codes)? = JSONValue.object(code)["enum"]
                {
                    for case .string(let c) in codes { named.insert(c) }
                }
                for member in members { walk(member.1) }
            case .array(let elements): elements.forEach(walk)
            default: break
            }
        }
        walk(OpenAPIDocument.json)
        #expect(named.subtracting(known).sorted() == [])
    }

    @Test func servedAsBuiltWithoutAToken() throws {
        let s = try AppTester(#"{"auth_token": "secret"}"#)
        let response = try s.call("GET", "/openapi.json")
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json; charset=utf-8")
        #expect(Array(response.body) == OpenAPIDocument.bytes)
        #expect(try JSONValue.parse(response.body) == OpenAPIDocument.json)
        #expect(OpenAPIDocument.json["openapi"] == .string("3.1.0"))
        // The token guards /v1 only.
        #expect(try s.call("GET", "/v1").status == 401)
        #expect(try s.call("GET", "/v1", headers: ["Authorization": "Bearer secret"]).status == 200)
        #expect(try s.call("POST", "/openapi.json").status == 405)
    }
}
