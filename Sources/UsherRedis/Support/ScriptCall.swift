import RedisClient
import UsherCore

/// One kind's script as its stores call it: the operations it has, the
/// refusals it answers, and the kind's error each refusal means.
protocol ScriptKind: SendableMetatype {
    /// The script's operations (`ARGV[1]`).
    associatedtype Operation: RawRepresentable<String>, Sendable
    /// The codes of the script's `fail(code, detail)`.
    associatedtype Refusal: ScriptRefusal
    associatedtype Failure: ResourceFailure
    /// What a call tells the error mapping beyond a refusal's detail (the hold asked for, an id).
    associatedtype Context: Sendable

    static var script: ResourceScript { get }
    /// Whether the operation's arguments follow the resource's name (`ARGV[4]`).
    static var leadsWithName: Bool { get }
    /// The kind's error for a refusal.
    static func failure(_ refusal: Refusal, detail: String, context: Context) -> Failure
    /// A deadline a refusal reports (a pool's next expiry when exhausted), to arm.
    static func deadline(of refusal: Refusal, detail: String) -> Timestamp?
}

extension ScriptKind {
    static var leadsWithName: Bool { true }
    static func deadline(of refusal: Refusal, detail: String) -> Timestamp? { nil }
}

/// A script refusal's code, read from `USHER <code> <detail>`.
protocol ScriptRefusal {
    init?(code: String)
}

extension ScriptRefusal where Self: RawRepresentable<String> {
    init?(code: String) { self.init(rawValue: code) }
}

/// One call of a kind's script: the operation, its arguments, and how its
/// reply (after the deadline every reply leads with) is read.
struct ScriptCall<Kind: ScriptKind, Reply: Sendable>: Sendable {
    let operation: Kind.Operation
    let arguments: [String]
    let context: Kind.Context
    let read: @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply

    init(
        _ operation: Kind.Operation, _ arguments: [String] = [], context: Kind.Context,
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) {
        self.operation = operation
        self.arguments = arguments
        self.context = context
        self.read = read
    }
}

extension ScriptCall where Kind.Context == Void {
    init(
        _ operation: Kind.Operation, _ arguments: [String] = [],
        read: @escaping @Sendable (inout ReplyReader) throws(ReplyShapeError) -> Reply
    ) {
        self.init(operation, arguments, context: (), read: read)
    }
}

extension ScriptCall where Reply == Void {
    /// A call whose reply holds nothing beyond the deadline (`tick`).
    init(_ operation: Kind.Operation, _ arguments: [String] = [], context: Kind.Context) {
        self.init(operation, arguments, context: context) { _ throws(ReplyShapeError) in }
    }
}

/// Where one resource's script calls go and what every reply reports: the
/// one send path of every kind's store.
struct ScriptRunner<Kind: ScriptKind>: Sendable {
    let keys: ResourceKeys
    /// The keys in the order the script reads `KEYS`.
    let keyList: [String]
    let connections: RedisConnectionPool
    let time: ScriptTime
    /// Where operations publish their notices (the resource's own channel).
    let channel: String
    /// Where `delete` publishes: every instance must hear it.
    let deletionChannel: String
    /// Hears each reply's next deadline.
    let onDeadline: @Sendable (Timestamp?) -> Void
    /// Hears that a script found the resource's keys missing.
    let onMissing: @Sendable () -> Void

    /// Runs `call` (publishing on `channel` when given); reports the next
    /// deadline; maps refusals to the kind's error.
    func run<Reply>(_ call: ScriptCall<Kind, Reply>, channel: String? = nil) async throws(Kind.Failure) -> Reply {
        let reply: RedisReply
        do {
            reply = try await Kind.script.run(
                call.operation.rawValue, keys: keyList, time: time, channel: channel ?? self.channel,
                arguments: arguments(call), on: connections.route(keys: keyList))
        } catch {
            throw failure(error, call)
        }
        return try read(reply, call)
    }

    /// `run` answered through `answer`, from the connection's queue (no task).
    func send<Reply>(
        _ call: ScriptCall<Kind, Reply>, answer: @escaping @Sendable (Result<Reply, Kind.Failure>) -> Void
    ) {
        Kind.script.send(
            call.operation.rawValue, keys: keyList, time: time, channel: channel, arguments: arguments(call),
            on: connections.route(keys: keyList)
        ) { result in
            switch result {
            case .success(let reply): answer(Result { () throws(Kind.Failure) in try read(reply, call) })
            case .failure(let error): answer(.failure(failure(error, call)))
            }
        }
    }

    private func arguments<Reply>(_ call: ScriptCall<Kind, Reply>) -> [String] {
        Kind.leadsWithName ? [keys.name] + call.arguments : call.arguments
    }

    /// The deadline the reply leads with, then what `call` reads from the rest.
    private func read<Reply>(_ reply: RedisReply, _ call: ScriptCall<Kind, Reply>) throws(Kind.Failure) -> Reply {
        let operation = call.operation.rawValue
        guard let items = reply.array else { throw .backendUnavailable("unexpected reply to \(operation)") }
        var reader = ReplyReader(items)
        do throws(ReplyShapeError) {
            let next = try reader.text("next deadline")
            if next.isEmpty {
                onDeadline(nil)
            } else {
                guard let micros = Int64(next) else { throw ReplyShapeError(what: "next deadline") }
                onDeadline(Timestamp(micros: micros))
            }
            return try call.read(&reader)
        } catch {
            throw .backendUnavailable("unexpected \(error.what) in the reply to \(operation)")
        }
    }

    private func failure<Reply>(_ failure: ScriptFailure, _ call: ScriptCall<Kind, Reply>) -> Kind.Failure {
        switch failure {
        case .unavailable(let why), .redis(let why):
            return .backendUnavailable(why)
        case .refused(let code, let detail):
            if failure.isMissing { onMissing() }
            guard let refusal = Kind.Refusal(code: code) else { return .backendUnavailable("\(code) \(detail)") }
            if let deadline = Kind.deadline(of: refusal, detail: detail) { onDeadline(deadline) }
            return Kind.failure(refusal, detail: detail, context: call.context)
        }
    }
}
