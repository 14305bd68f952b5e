extension Pipeline {
    /// Pulls the next item when fewer than `low_water` items are ready and
    /// there is room: one pull at a time, its result applied on the actor.
    /// After an empty pull (`nothing`) or a failure the pump backs off (0.1 s,
    /// doubling to 5 s, on the clock); a skipped bad record does not back off.
    func pumpSource(now: Timestamp) {
        guard lifecycle == .open, var pump = source, !pump.pulling, !pump.status.exhausted else { return }
        defer { source = pump }
        if let payload = pump.pending {
            // Kept while there is no room or no storage budget for it.
            guard engine.hasRoom(), let pushed = try? engine.push(PipelinePushRequest(payload: payload), now: now)
            else {
                return
            }
            _ = emitPushed(pushed)
            pump.pending = nil
        }
        guard engine.readyCount < pump.status.config.lowWater, engine.hasRoom() else { return }
        if let retry = pump.status.nextRetryAt {
            guard now >= retry else { return }
            pump.status.nextRetryAt = nil
        }
        if pump.reader == nil {
            do {
                guard let factory = sourceFactory else {
                    throw SourceError(message: "no reader is available for \(pump.status.config.kindName) sources")
                }
                pump.reader = try factory(pump.status.config)
            } catch {
                Self.record(error, in: &pump, now: now)
                return
            }
        }
        guard let reader = pump.reader else { return }
        pump.pulling = true
        pullTask = Task { [weak self] in
            let result: Result<SourcePull, any Error>
            do {
                result = .success(try await reader.next())
            } catch {
                result = .failure(error)
            }
            await self?.pulled(result)
        }
    }

    /// A pull finished.
    func pulled(_ result: Result<SourcePull, any Error>) {
        guard var pump = source else { return }
        pump.pulling = false
        pullTask = nil
        guard lifecycle == .open else {
            source = pump
            return
        }
        let now = clock.now()
        // A good pull ends the failure before it (a missing file that has
        // appeared); a skipped record's message stays, errors_total counts both.
        if case .success = result, pump.failing {
            pump.status.lastError = nil
            pump.failing = false
        }
        switch result {
        case .success(.item(let payload)):
            pump.status.pulledTotal += 1
            pump.backoff = 0
            do throws(PipelineError) {
                _ = emitPushed(try engine.push(PipelinePushRequest(payload: payload), now: now))
            } catch {
                // Producers filled the room while the pull ran: keep it for later.
                pump.pending = payload
            }
        case .success(.nothing):
            Self.backOff(&pump, now: now)
        case .success(.exhausted):
            pump.status.exhausted = true
            pump.reader = nil
        case .failure(let error):
            Self.record(error, in: &pump, now: now)
        }
        source = pump
        settle()
    }

    /// When the pump wants to pull again after a back-off, if it is waiting for one.
    func sourceRetryAt() -> Timestamp? {
        guard let pump = source, !pump.pulling, !pump.status.exhausted else { return nil }
        return pump.status.nextRetryAt
    }

    /// Counts an error; anything but a skipped record backs off.
    private static func record(_ error: any Error, in pump: inout SourcePump, now: Timestamp) {
        pump.status.errorsTotal += 1
        pump.status.lastError = String(describing: error)
        pump.failing = !(error is SourceRecordError)
        if pump.failing { backOff(&pump, now: now) }
    }

    private static func backOff(_ pump: inout SourcePump, now: Timestamp) {
        pump.backoff =
            pump.backoff == 0
            ? backoffRange.lowerBound : min(pump.backoff * 2, backoffRange.upperBound)
        pump.status.nextRetryAt = now.adding(seconds: pump.backoff)
    }
}
