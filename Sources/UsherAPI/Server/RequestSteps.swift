import HTTPServer
import UsherCore

// What happens to every request, in order (`handle`), and the answers that park.
extension UsherApp: HTTPHandler {
    /// The steps of every request, in order: route, access, resolve the
    /// resource's name, run, refuse a wait once shutdown has begun, count, log.
    package func handle(_ request: HTTPRequest) -> HTTPHandlerResult {
        let start = HTTPMetrics.now()
        let match = router.match(request.method, request.path)
        let matched = match.found
        var result: HTTPHandlerResult
        if let refused = access.refusal(for: request, access: matched?.route.access ?? RouteAccess(path: request.path))
        {
            result = .respond(refused.response)
        } else {
            switch match {
            case .notFound:
                result = .respond(APIError.notFound("no route for \(request.path)").response)
            case .methodNotAllowed(let allowed):
                result = .respond(APIError.methodNotAllowed(request.method, allowed: allowed).response)
            case .found(let route, _, let parameters):
                result = run(route, Call(request: request, parameters: parameters, app: self))
            }
        }
        if isStopping, result.isDeferred { result = .respond(APIError.shuttingDown().response) }
        let template = matched?.template ?? "unmatched"
        result = httpMetrics.measure(
            result, slot: matched?.route.slot, route: template, method: request.method, since: start)
        guard logger.level == .debug else { return result }
        return accessLogged(result, request: request, route: template, since: start)
    }

    /// Runs `route` once. A `{name}` this process has not heard of may have
    /// been made through another instance: with Redis, it is looked up there
    /// first (the connection parked), so the route finds it.
    func run(_ route: Route, _ call: Call) -> HTTPHandlerResult {
        if let kind = route.resource, redis != nil, let name = call.parameters["name"], Names.isValid(name),
            !registry.contains(kind, name)
        {
            return later { () async throws(APIError) -> HTTPResponse in
                _ = await self.discoverShared(kind, name)
                return await Self.resolve(try route.run(call))
            }
        }
        do throws(APIError) { return try route.run(call) } catch { return .respond(error.response) }
    }

    /// At `debug`, one access-log line per answered request (after a long-poll
    /// ends, for deferred answers).
    private func accessLogged(
        _ result: HTTPHandlerResult, request: HTTPRequest, route: String, since start: UInt64
    ) -> HTTPHandlerResult {
        let logger = self.logger
        let method = request.method
        let path = request.path
        @Sendable func log(_ status: Int) {
            logger.debug(
                "request",
                [
                    ("method", .string(method)), ("path", .string(path)), ("route", .string(route)),
                    ("status", .int(status)), ("seconds", .double(HTTPMetrics.seconds(since: start))),
                ])
        }
        switch result {
        case .answer(.ready(let response), _):
            log(response.get().status)
            return result
        case .stream(let stream):
            log(stream.status)
            return result
        case .answer(.later, _), .answer(.handedBack, _):
            return result.observingDeferred { log($0.status) }
        }
    }

    package func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        switch refusal {
        case .badRequest(let detail): APIError.badRequest(detail).response
        case .payloadTooLarge(let limit): APIError.payloadTooLarge(limit: limit).response
        case .notImplemented(let detail): APIError.notImplemented(detail).response
        case .uriTooLong(let detail): APIError.uriTooLong("\(detail) (max_query_parameters)").response
        case .headerFieldsTooLarge(let detail): APIError.headerFieldsTooLarge(detail).response
        }
    }

    /// The Host, Origin and token checks, on the head of a request that
    /// waits for `100 Continue`: a refusal must come before the client sends
    /// its body. Counted and logged like any answer.
    package func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        let start = HTTPMetrics.now()
        let matched = router.match(request.method, request.path).found
        let template = matched?.template ?? "unmatched"
        let access = matched?.route.access ?? RouteAccess(path: request.path)
        guard let refused = self.access.refusal(for: request, access: access) else { return nil }
        var result = httpMetrics.measure(
            .respond(refused.response), slot: matched?.route.slot, route: template, method: request.method,
            since: start)
        if logger.level == .debug { result = accessLogged(result, request: request, route: template, since: start) }
        return result.immediate ?? refused.response
    }

    /// The response of a route's result, run after a Redis lookup (a stream
    /// cannot be answered from inside a deferred answer: 500).
    static func resolve(_ result: HTTPHandlerResult) async -> HTTPResponse {
        await result.response(orForAStream: APIError.internalError("a stream cannot follow a Redis lookup").response)
    }

    /// Runs `work` with the connection parked, mapping its error to a problem.
    func later(_ work: @escaping @Sendable () async throws(APIError) -> HTTPResponse) -> HTTPHandlerResult {
        .answer(
            .later {
                do throws(APIError) { return .success(try await work()) } catch { return .success(error.response) }
            })
    }
}

extension Router<Route>.Match {
    /// The route found and its template, or nil.
    fileprivate var found: (route: Route, template: String)? {
        guard case .found(let route, let template, _) = self else { return nil }
        return (route, template)
    }
}
