import RedisClient
import UsherCore

/// One kind's Lua sources behind `common.lua`, run with the calling convention
/// `common.lua` describes. Error replies `USHER <code> <detail>` come back as
/// `ScriptFailure.refused`; a lost or slow connection as `.unavailable`.
struct ResourceScript: Sendable {
    let script: RedisScript

    /// The script for a kind whose sources (UTF-8 bytes of `.lua` files) run in this order.
    init(kindSources: [UInt8]...) {
        let sources = [PackageResources.common_lua] + kindSources
        script = RedisScript(sources.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n"))
    }

    /// Runs `operation` on the resource's `keys` at `time`, publishing notices
    /// on `channel`, sent where `route` says (`connections.route(keys:)`).
    package func run(
        _ operation: String, keys: [String], time: ScriptTime, channel: String, arguments: [String] = [],
        on route: RedisRoute
    ) async throws(ScriptFailure) -> RedisReply {
        let reply: RedisReply
        do {
            reply = try await script.run(
                on: route, keys: keys, arguments: [operation, time.argument, channel] + arguments)
        } catch {
            throw .unavailable(error.description)
        }
        if let message = reply.errorMessage {
            throw ScriptFailure(errorReply: message)
        }
        return reply
    }

    /// `run` answered through `answer`, from the connection's queue (no task).
    package func send(
        _ operation: String, keys: [String], time: ScriptTime, channel: String, arguments: [String] = [],
        on route: RedisRoute, answer: @escaping @Sendable (Result<RedisReply, ScriptFailure>) -> Void
    ) {
        let argv = [operation, time.argument, channel] + arguments
        script.send(on: route, keys: keys.map { Array($0.utf8) }, arguments: argv.map { Array($0.utf8) }) { result in
            switch result {
            case .success(let reply):
                if let message = reply.errorMessage {
                    answer(.failure(ScriptFailure(errorReply: message)))
                } else {
                    answer(.success(reply))
                }
            case .failure(let error): answer(.failure(.unavailable(error.description)))
            }
        }
    }

    /// `run` on one connection.
    package func run(
        _ operation: String, keys: [String], time: ScriptTime, channel: String, arguments: [String] = [],
        on connection: RedisConnection
    ) async throws(ScriptFailure) -> RedisReply {
        try await run(
            operation, keys: keys, time: time, channel: channel, arguments: arguments, on: RedisRoute(connection))
    }
}

/// Why a script call did not answer.
package enum ScriptFailure: Error, Sendable, Equatable {
    /// No answer from Redis (connection down, timeout): 503 `backend_unavailable`.
    case unavailable(String)
    /// The script refused the operation: `code` and `detail` from `fail(code, detail)`.
    case refused(code: String, detail: String)
    /// Redis itself answered with an error (a bug in a script, OOM, READONLY…).
    case redis(String)

    /// The script found the resource's keys missing (`fail('gone')`).
    var isMissing: Bool { if case .refused("gone", _) = self { true } else { false } }

    init(errorReply message: String) {
        // Redis prefixes script errors with "ERR " in some versions.
        let text = message.hasPrefix("ERR USHER ") ? String(message.dropFirst(4)) : message
        guard text.hasPrefix("USHER ") else {
            self = .redis(message)
            return
        }
        let rest = text.dropFirst("USHER ".count)
        let code = rest.prefix { $0 != " " }
        self = .refused(code: String(code), detail: String(rest.dropFirst(code.count).drop { $0 == " " }))
    }
}
