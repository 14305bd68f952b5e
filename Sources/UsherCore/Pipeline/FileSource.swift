import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A `file` source: NDJSON (one JSON value per line) read lazily, a chunk at
/// a time, so memory stays within `maxLineBytes + chunkBytes` however large
/// the file is.
///
/// - The file is opened at the first pull (and again after a failed open, so
///   a file that appears later is picked up). `path` must stay inside
///   `dataDir`: see `resolve(path:dataDir:)`.
/// - Blank lines are skipped; a line that is not JSON, longer than
///   `maxLineBytes` or nested deeper than `maxDepth`, is skipped and reported
///   as a `SourceRecordError`.
/// - At the end of the file (a last line without a newline still counts) the
///   file is closed and every later pull answers `.exhausted`.
final class FileSource: PipelineSourceReader {
    /// The configured path, relative to `dataDir`.
    package let path: String
    /// The directory the path is relative to.
    let dataDir: String
    /// Longer lines are skipped.
    let maxLineBytes: Int
    /// Lines nested deeper are skipped (`max_json_depth`).
    package let maxDepth: Int
    /// Bytes read per `read(2)`.
    let chunkBytes: Int

    private struct State: ~Copyable {
        var fd: Int32 = -1
        /// Unconsumed bytes live at `buffer[start...]`.
        var buffer: [UInt8] = []
        var start = 0
        /// Bytes after `start` already known to hold no newline.
        var scanned = 0
        /// Discarding the rest of an over-long line.
        var skipping = false
        var eof = false
        var exhausted = false
        /// Lines finished so far.
        var lines = 0
        var peak = 0

        deinit {
            if fd >= 0 { close(fd) }
        }
    }

    private let state = Locked(State())

    /// A reader of `dataDir/path`; nothing is opened yet.
    init(
        path: String, dataDir: String, maxLineBytes: Int = 65_536, maxDepth: Int = JSONLimits().maxDepth,
        chunkBytes: Int = 65_536
    ) {
        self.path = path
        self.dataDir = dataDir
        self.maxLineBytes = max(1, maxLineBytes)
        self.maxDepth = maxDepth
        self.chunkBytes = max(1, chunkBytes)
    }

    /// Bytes held in the line buffer now.
    var bufferedBytes: Int { state.withLock { $0.buffer.count } }
    /// The most bytes the line buffer ever held (at most `maxLineBytes + chunkBytes`).
    var peakBufferedBytes: Int { state.withLock { $0.peak } }
    /// Lines read so far (blank and bad ones included).
    var linesRead: Int { state.withLock { $0.lines } }

    /// The next value: blocking file reads of one chunk at a time, done on the calling task.
    package func next() async throws -> SourcePull {
        try state.withLock { (s: inout State) throws -> SourcePull in try self.step(&s) }
    }

    /// The real path of `dataDir/path`, checked to lie inside the real path of
    /// `dataDir` (compared with a trailing slash, so `data2` is not inside
    /// `data`), after refusing absolute paths and `..` components. Symlinks
    /// inside `dataDir` are fine as long as they lead to a file inside it.
    static func resolve(path: String, dataDir: String) throws(SourceError) -> String {
        if let problem = PipelineSourceConfig.pathProblem(path) { throw SourceError(message: "path \(problem)") }
        guard let root = realPath(dataDir) else {
            throw SourceError(message: "data_dir \(dataDir) cannot be resolved: \(errnoText())")
        }
        let joined = root.hasSuffix("/") ? root + path : root + "/" + path
        guard let real = realPath(joined) else { throw SourceError(message: "\(path): \(errnoText())") }
        let prefix = root.hasSuffix("/") ? root : root + "/"
        guard real.hasPrefix(prefix) else { throw SourceError(message: "\(path) leads outside data_dir") }
        return real
    }

    // MARK: - Reading

    private func step(_ s: inout State) throws -> SourcePull {
        if s.exhausted { return .exhausted }
        if s.fd < 0 { s.fd = try openFile() }
        while true {
            if let nl = findNewline(&s) {
                let lineStart = s.start
                s.start = nl + 1
                s.scanned = 0
                s.lines += 1
                if s.skipping {
                    s.skipping = false
                    continue
                }
                if nl - lineStart > maxLineBytes { throw tooLong(line: s.lines) }
                if let value = try parse(s.buffer[lineStart..<nl], line: s.lines) { return .item(value) }
                continue
            }
            let pending = s.buffer.count - s.start
            if !s.skipping && pending > maxLineBytes {
                s.skipping = true
                dropBuffer(&s)
                throw tooLong(line: s.lines + 1)
            }
            if s.skipping { dropBuffer(&s) }
            if s.eof {
                if pending > 0 && !s.skipping {
                    let lineStart = s.start
                    s.start = s.buffer.count
                    s.lines += 1
                    if let value = try parse(s.buffer[lineStart...], line: s.lines) { return .item(value) }
                }
                finish(&s)
                return .exhausted
            }
            if s.start > 0 {
                s.buffer.removeSubrange(0..<s.start)
                s.start = 0
            }
            try fill(&s)
        }
    }

    /// Appends one chunk, or marks the end of the file.
    private func fill(_ s: inout State) throws {
        let old = s.buffer.count
        s.buffer.append(contentsOf: repeatElement(0, count: chunkBytes))
        let fd = s.fd
        let chunk = chunkBytes
        var n: Int
        repeat {
            n = s.buffer.withUnsafeMutableBytes { raw in read(fd, raw.baseAddress! + old, chunk) }
        } while n < 0 && errno == EINTR
        s.peak = max(s.peak, s.buffer.count)
        s.buffer.removeLast(chunk - max(0, n))
        if n < 0 { throw SourceError(message: "\(path): read failed: \(Self.errnoText())") }
        if n == 0 { s.eof = true }
    }

    private func findNewline(_ s: inout State) -> Int? {
        let from = s.start + s.scanned
        guard from < s.buffer.count else { return nil }
        if let i = s.buffer[from...].firstIndex(of: 0x0A) { return i }
        s.scanned = s.buffer.count - s.start
        return nil
    }

    /// The line's JSON value; nil for a blank line.
    private func parse(_ bytes: ArraySlice<UInt8>, line: Int) throws -> JSONValue? {
        guard bytes.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return nil }
        do {
            return try JSONValue.parse(Data(bytes), maxDepth: maxDepth)
        } catch {
            let problem = error.isTooDeep ? error.message : "malformed JSON"
            throw SourceRecordError(message: "\(path) line \(line): \(problem), skipped")
        }
    }

    private func tooLong(line: Int) -> SourceRecordError {
        SourceRecordError(message: "\(path) line \(line): longer than \(maxLineBytes) bytes, skipped")
    }

    private func dropBuffer(_ s: inout State) {
        s.buffer.removeAll(keepingCapacity: true)
        s.start = 0
        s.scanned = 0
    }

    private func finish(_ s: inout State) {
        s.exhausted = true
        if s.fd >= 0 { close(s.fd) }
        s.fd = -1
        s.buffer = []
        s.start = 0
    }

    /// Opens the resolved path read-only; refuses anything but a regular file.
    private func openFile() throws -> Int32 {
        let real = try Self.resolve(path: path, dataDir: dataDir)
        // O_NOFOLLOW: the resolved path has no symlinks left, so one appearing
        // in between is refused; O_NONBLOCK: a FIFO cannot hang the pull.
        let fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { throw SourceError(message: "\(path): \(Self.errnoText())") }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw SourceError(message: "\(path) is not a regular file")
        }
        return fd
    }

    private static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    private static func errnoText() -> String {
        String(cString: strerror(errno))
    }
}
