import Answers
import RedisClient
import UsherCore

/// A machine kept in Redis and shared by every Usher that uses the same
/// Redis: `MachineService` over `RedisMachineStore`. Every answer comes later
/// (one script call). This object holds no machine state of its own, only
/// what this process does about it: long-polls parked here, the timer at the
/// machine's next deadline, events for this process's subscribers.
package final class RedisMachine: MachineService, RedisResource {
    package let name: String
    package let store: RedisMachineStore
    private let backend: RedisBackend
    private let events: EventLog?
    package let host: LocalHost
    /// Every notice moves the version: waits park on this one subject.
    private static let versionSubject = "version"

    package init(name: String, backend: RedisBackend, events: EventLog?) {
        self.name = name
        self.backend = backend
        self.events = events
        self.host = LocalHost(kind: "machine", name: name, backend: backend)
        self.store = RedisMachineStore(host: host)
        host.drive(self)
    }

    // MARK: MachineService

    package func readSnapshot() -> Pending<MachineSnapshot, MachineError> {
        call { store async throws(MachineError) in try await store.snapshot() }
    }

    package func fireEvent(_ event: String, expectedVersion: Int64?, data: JSONValue?) -> Pending<
        TransitionResult, MachineError
    > {
        call { store async throws(MachineError) in
            try await store.fire(event: event, expectedVersion: expectedVersion, data: data)
        }
    }

    package func openTransaction(event: String, expectedVersion: Int64?, data: JSONValue?, seconds: Double) -> Pending<
        MachineTransaction, MachineError
    > {
        call { store async throws(MachineError) in
            try await store.open(event: event, expectedVersion: expectedVersion, data: data, seconds: seconds)
        }
    }

    package func commitTransaction(_ id: String) -> Pending<TransitionResult, MachineError> {
        call { store async throws(MachineError) in try await store.commit(transaction: id) }
    }

    package func abortTransaction(_ id: String) -> Pending<MachineTransaction, MachineError> {
        call { store async throws(MachineError) in try await store.abort(transaction: id) }
    }

    /// Re-reads at every notice about the machine and at least every
    /// `Self.pollSeconds`; Redis unreachable until the deadline: `backendUnavailable`.
    package func parkUntilVersion(other version: Int64, until deadline: Timestamp) async throws(MachineError)
        -> MachineSnapshot
    {
        let clock = backend.clock
        while true {
            switch host.phase {
            case .closed: throw .gone
            case .shuttingDown: throw .shuttingDown
            case .open: break
            }
            let ticket = board.open(Self.versionSubject)
            let read: Result<MachineSnapshot, MachineError>
            do throws(MachineError) { read = .success(try await store.snapshot()) } catch { read = .failure(error) }
            let now = clock.now()
            switch read {
            case .success(let snapshot):
                if snapshot.version != version || now >= deadline || Task.isCancelled {
                    board.close(ticket)
                    return snapshot
                }
            case .failure(.backendUnavailable(let why)):
                if now >= deadline {
                    board.close(ticket)
                    throw .backendUnavailable(why)
                }
            case .failure(let error):
                board.close(ticket)
                throw error
            }
            await board.wait(ticket, until: min(deadline, now.adding(seconds: Self.pollSeconds)))
        }
    }

    // MARK: Lifecycle

    /// Creates the machine in Redis in its initial state, or answers the one
    /// there (`created` false; the caller compares the definitions).
    package func create(definitionName: String?, definition: MachineDefinition) async throws(MachineError) -> (
        snapshot: MachineSnapshot, created: Bool
    ) {
        try await store.create(definitionName: definitionName, definition: definition)
    }

    // MARK: NoticeListener

    /// Notices wake waits parked here and feed event subscribers here; with
    /// neither, they are dropped unread (see `RedisResource.isHeard`).
    package var wantsNotices: Bool { isHeard(events) }

    package func receive(_ payload: [UInt8]) {
        guard let notice = RedisMachineStore.decodeNotice(payload) else { return }
        if notice.deleted {
            close()
            return
        }
        arm(at: notice.next)
        emitEvents(notice)
        board.post(Self.versionSubject)
    }

    // MARK: Internals

    /// Emits what the notice reports, as `StateMachine` does for its own
    /// changes: by version, a transition before the transaction it committed.
    private func emitEvents(_ notice: MachineNotice) {
        guard let events, events.isRecording else { return }
        var transitions = notice.transitions[...]
        var transactions = notice.transactions[...]
        while let transition = transitions.first {
            if let transaction = transactions.first, transaction.version < transition.version {
                emit(transaction)
                transactions.removeFirst()
            } else {
                events.emit(
                    ResourceEvent.Draft(
                        kind: "machine", name: name, type: "transition", subject: .transition(transition)))
                transitions.removeFirst()
            }
        }
        for transaction in transactions { emit(transaction) }
    }

    private func emit(_ transaction: MachineTransaction) {
        let type: String
        switch transaction.status {
        case .open: type = "transaction-opened"
        case .committed: type = "transaction-committed"
        case .aborted, .expired: type = "transaction-aborted"
        }
        events?.emit(ResourceEvent.Draft(kind: "machine", name: name, type: type, subject: .transaction(transaction)))
    }
}
