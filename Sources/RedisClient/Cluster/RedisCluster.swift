import Locking
import Synchronization

/// A Redis Cluster as one process sees it: the slot map (from `CLUSTER
/// SLOTS`, asked of the seed node or any node known since), a few
/// connections to each master, and commands sent to the master of their
/// slot. It follows `MOVED` (the slot has a new owner: remember it, re-read
/// the map in the background) and `ASK` (the slot is migrating: `ASKING`,
/// then the command, on the node named, without touching the map), and
/// retries `TRYAGAIN` (a multi-key command while its slot is half migrated)
/// after a short pause; a bounded number of times each.
package final class RedisCluster: Sendable {
    /// A node's address as the cluster names it (`host:port`).
    package struct Address: Hashable, Sendable, CustomStringConvertible {
        var host: String
        var port: Int

        init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Parses `host:port` (the host may be an IPv6 address); an empty or
        /// unknown (`?`) host is `fallbackHost`, the node that named it.
        init?(_ text: Substring, fallbackHost: String) {
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
                return nil
            }
            let host = String(text[..<colon])
            self.init(host: host.isEmpty || host == "?" ? fallbackHost : host, port: port)
        }

        package var description: String { "\(host):\(port)" }
    }

    /// Redirections followed since the start, for tests and figures.
    package struct Redirections: Sendable, Equatable {
        package var moved = 0
        package var asked = 0
        package var retried = 0

        package init(moved: Int = 0, asked: Int = 0, retried: Int = 0) {
            (self.moved, self.asked, self.retried) = (moved, asked, retried)
        }
    }

    /// Redirections (`MOVED`, `ASK`) one command may follow before it fails.
    static let maxRedirections = 16
    /// `TRYAGAIN` retries of one command, after pauses from 5 ms doubling to
    /// 200 ms (about 1.1 s in all: a migration of one slot takes milliseconds).
    static let maxRetries = 10
    static let maxRetryPause = Duration.milliseconds(200)
    /// Background re-reads of the map after a failure are at least this far apart.
    static let refreshInterval = Duration.milliseconds(500)

    private let seed: RedisEndpoint
    private let connectTimeout: Double
    private let commandTimeout: Double
    private let connectionsPerNode: Int
    private let map = Locked(SlotMap())
    private let nodes = Locked<[Address: Node]>([:])
    private let refresh = Locked(RefreshState())
    private let redirections = Locked(Redirections())
    /// Nodes whose last command got no answer.
    private let silent = Locked<Set<Address>>([])
    private let recovery = Locked<(@Sendable (Address) -> Void)?>(nil)
    private let subscriberTurn = Atomic<Int>(0)

    /// A cluster reached first through `seed` (its user and password are
    /// every node's); `connectionsPerNode` command connections to each master.
    /// Connects on the first command.
    package init(
        seed: RedisEndpoint, connectTimeoutSeconds: Double, commandTimeoutSeconds: Double, connectionsPerNode: Int = 2
    ) {
        var seed = seed
        seed.database = 0
        self.seed = seed
        self.connectTimeout = connectTimeoutSeconds
        self.commandTimeout = commandTimeoutSeconds
        self.connectionsPerNode = max(1, connectionsPerNode)
    }

    /// Sends `arguments` to the master of `slot` (any master when nil),
    /// following redirections. Error replies other than redirections come
    /// back as values; a node that does not answer throws, as a single
    /// Redis does (the map is re-read in the background then: a failover
    /// may have moved its slots).
    package func command(_ arguments: [[UInt8]], slot: Int?) async throws(RedisError) -> RedisReply {
        if map.withLock({ $0.isEmpty }) { try await readSlotMap() }
        var target = owner(of: slot)
        var asking = false
        var pause = Duration.milliseconds(5)
        var (redirected, retried) = (0, 0)
        while redirected <= Self.maxRedirections, retried <= Self.maxRetries {
            let reply: RedisReply
            do { reply = try await send(arguments, to: target, asking: asking) } catch {
                refreshSoon()
                throw error
            }
            guard let message = reply.errorMessage, let redirect = Redirect(message, from: target) else { return reply }
            switch redirect {
            case .moved(let slot, let address):
                redirected += 1
                redirections.withLock { $0.moved += 1 }
                map.withLock { $0.assign(slot, to: address) }
                refreshSoon(force: true)
                (target, asking) = (address, false)
            case .ask(let address):
                redirected += 1
                redirections.withLock { $0.asked += 1 }
                (target, asking) = (address, true)
            case .tryAgain:
                retried += 1
                redirections.withLock { $0.retried += 1 }
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, Self.maxRetryPause)
                (target, asking) = (owner(of: slot), false)
            }
        }
        throw .unavailable(
            "slot \(slot.map(String.init) ?? "any"): \(redirected) redirections and \(retried) TRYAGAIN, no answer")
    }

    /// Sends `arguments` to the node at `address` as they are (no redirections followed).
    package func command(_ arguments: [String], at address: Address) async throws(RedisError) -> RedisReply {
        try await send(arguments.map { Array($0.utf8) }, to: address, asking: false)
    }

    /// Calls `handler` when a node that did not answer answers again: it may
    /// have restarted empty, so what was read from it may be gone.
    package func onRecovery(_ handler: @escaping @Sendable (Address) -> Void) {
        recovery.withLock { $0 = handler }
    }

    /// One command on one of the node's connections; with `asking`, `ASKING`
    /// first, in the same write, so that no other command comes between them.
    private func send(_ arguments: [[UInt8]], to address: Address, asking: Bool) async throws(RedisError)
        -> RedisReply
    {
        let connection = node(address).next()
        let reply: RedisReply
        do {
            reply =
                asking
                ? try await connection.pipeline([[Array("ASKING".utf8)], arguments]).last ?? .null
                : try await connection.command(arguments)
        } catch {
            silent.withLock { _ = $0.insert(address) }
            throw error
        }
        if silent.withLock({ $0.remove(address) != nil }) { recovery.withLock { $0 }?(address) }
        return reply
    }

    /// The masters the map names, in slot order.
    package var masters: [Address] { map.withLock { $0.masters } }

    /// Redirections followed so far.
    package var redirectionCount: Redirections { redirections.withLock { $0 } }

    /// The endpoint of a node (the seed's user and password, database 0).
    func endpoint(_ address: Address) -> RedisEndpoint {
        var endpoint = seed
        endpoint.host = address.host
        endpoint.port = address.port
        return endpoint
    }

    /// Where the subscriber connects next: the seed first, then the known
    /// nodes in turn, so that a subscriber whose node went down moves on.
    package func nextSubscriberEndpoint() -> RedisEndpoint {
        let seedAddress = Address(host: seed.host, port: seed.port)
        let candidates = [seedAddress] + masters.filter { $0 != seedAddress }
        return endpoint(candidates[subscriberTurn.wrappingAdd(1, ordering: .relaxed).oldValue % candidates.count])
    }

    /// Closes every connection.
    func close() async {
        for node in nodes.withLock({ Array($0.values) }) {
            for connection in node.connections { await connection.close() }
        }
    }

    // MARK: The slot map

    /// The master of `slot`; for nil or a slot no master serves, any master
    /// (which redirects or refuses), or the seed before the map is known.
    private func owner(of slot: Int?) -> Address {
        map.withLock { map in slot.flatMap { map.owner($0) } ?? map.masters.first }
            ?? Address(host: seed.host, port: seed.port)
    }

    private func node(_ address: Address) -> Node {
        nodes.withLock { nodes in
            if let node = nodes[address] { return node }
            let node = Node(
                (0..<connectionsPerNode).map { _ in
                    RedisConnection(
                        endpoint: endpoint(address), connectTimeoutSeconds: connectTimeout,
                        commandTimeoutSeconds: commandTimeout)
                })
            nodes[address] = node
            return node
        }
    }

    /// Reads the map with `CLUSTER SLOTS` from the first node that answers:
    /// the known masters, then the seed.
    package func readSlotMap() async throws(RedisError) {
        let seedAddress = Address(host: seed.host, port: seed.port)
        var lastError = RedisError.unavailable("no cluster node answered CLUSTER SLOTS")
        for address in masters.filter({ $0 != seedAddress }) + [seedAddress] {
            do throws(RedisError) {
                let reply = try await node(address).next().command(["CLUSTER", "SLOTS"])
                if let message = reply.errorMessage {
                    throw RedisError.reply("CLUSTER SLOTS at \(address): \(message)")
                }
                let fresh = try SlotMap(clusterSlots: reply, askedHost: address.host)
                map.withLock { $0 = fresh }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// Re-reads the map in the background, one read at a time, and after a
    /// failure not sooner than `refreshInterval` after the last one.
    private func refreshSoon(force: Bool = false) {
        let start = refresh.withLock { state in
            let now = ContinuousClock.now
            guard !state.running, force || state.last.map({ now - $0 >= Self.refreshInterval }) ?? true else {
                return false
            }
            state.running = true
            state.last = now
            return true
        }
        guard start else { return }
        Task {
            try? await readSlotMap()
            refresh.withLock { $0.running = false }
        }
    }
}

/// The connections to one node, used in turn.
private final class Node: Sendable {
    let connections: [RedisConnection]
    private let turn = Atomic<Int>(0)

    init(_ connections: [RedisConnection]) { self.connections = connections }

    func next() -> RedisConnection {
        connections[turn.wrappingAdd(1, ordering: .relaxed).oldValue % connections.count]
    }
}

private struct RefreshState: Sendable {
    var running = false
    var last: ContinuousClock.Instant?
}

/// What an error reply asks of a cluster client.
enum Redirect: Equatable {
    /// `MOVED <slot> <host:port>`: the slot belongs to that node now.
    case moved(slot: Int, to: RedisCluster.Address)
    /// `ASK <slot> <host:port>`: this once, ask that node (with `ASKING`).
    case ask(RedisCluster.Address)
    /// `TRYAGAIN`: the keys are split by a migration in progress; retry shortly.
    case tryAgain

    /// Nil for any other error reply.
    init?(_ message: String, from node: RedisCluster.Address) {
        let words = message.split(separator: " ")
        switch words.first {
        case "MOVED" where words.count == 3:
            guard let slot = Int(words[1]), let address = RedisCluster.Address(words[2], fallbackHost: node.host)
            else { return nil }
            self = .moved(slot: slot, to: address)
        case "ASK" where words.count == 3:
            guard let address = RedisCluster.Address(words[2], fallbackHost: node.host) else { return nil }
            self = .ask(address)
        case "TRYAGAIN":
            self = .tryAgain
        default:
            return nil
        }
    }
}
