import Foundation
import Locking
import TestSupport

/// `docs/recipes.md` read as a test reads it: its scripts (a ```bash block
/// after `<!-- script: NAME -->`), and per `## ` section its transcripts
/// (```console blocks) and expected outputs (```text blocks).
struct RecipeDocument {
    /// One `$ command` of a transcript, the lines it prints, and whether the
    /// transcript stops it with `^C` once they are printed.
    struct Step: Sendable {
        var command: String
        var expected: [String] = []
        var interrupted = false
    }

    struct Section: Sendable {
        var title: String
        var transcripts: [[Step]] = []
        var outputs: [[String]] = []
    }

    var scripts: [String: String] = [:]
    var sections: [Section] = []

    static let url = OneAtATime.ReadmeExamplesTests.root.appendingPathComponent("docs/recipes.md")

    static func load() throws -> RecipeDocument {
        let text = try String(contentsOf: url, encoding: .utf8)
        var document = RecipeDocument()
        var scriptName: String?
        var block: (kind: String, lines: [String])?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if var open = block {
                if line == "```" {
                    try document.add(kind: open.kind, lines: open.lines, scriptName: scriptName)
                    scriptName = nil
                    block = nil
                } else {
                    open.lines.append(line)
                    block = open
                }
            } else if line.hasPrefix("<!-- script: "), line.hasSuffix(" -->") {
                scriptName = String(line.dropFirst(13).dropLast(4))
            } else if line.hasPrefix("## ") {
                document.sections.append(Section(title: String(line.dropFirst(3))))
            } else if line.hasPrefix("```") {
                block = (String(line.dropFirst(3)), [])
            }
        }
        return document
    }

    private mutating func add(kind: String, lines: [String], scriptName: String?) throws {
        struct Malformed: Error, CustomStringConvertible { let description: String }
        switch kind {
        case "bash":
            guard let scriptName else { throw Malformed(description: "a bash block without <!-- script: NAME -->") }
            scripts[scriptName] = lines.joined(separator: "\n") + "\n"
        case "console":
            var steps: [Step] = []
            for line in lines {
                if line.hasPrefix("$ ") {
                    steps.append(Step(command: String(line.dropFirst(2))))
                } else if line == "^C", !steps.isEmpty {
                    steps[steps.count - 1].interrupted = true
                } else if !steps.isEmpty {
                    steps[steps.count - 1].expected.append(line)
                } else {
                    throw Malformed(description: "a console block must start with `$ `: \(line)")
                }
            }
            guard !sections.isEmpty else { throw Malformed(description: "a transcript before the first section") }
            sections[sections.count - 1].transcripts.append(steps)
        case "text":
            guard !sections.isEmpty else { throw Malformed(description: "an output before the first section") }
            sections[sections.count - 1].outputs.append(lines)
        default: break
        }
    }

    /// Whether `lines` are `expected`, line by line, where `…` in an expected
    /// line stands for any text.
    static func matches(_ lines: [String], _ expected: [String]) -> Bool {
        lines.count == expected.count && zip(lines, expected).allSatisfy(lineMatches)
    }

    static func lineMatches(_ line: String, _ pattern: String) -> Bool {
        let pieces = pattern.components(separatedBy: "…")
        guard pieces.count > 1 else { return line == pattern }
        guard line.hasPrefix(pieces[0]), line.hasSuffix(pieces[pieces.count - 1]),
            line.count >= pieces[0].count + pieces[pieces.count - 1].count
        else { return false }
        var rest = line.dropFirst(pieces[0].count).dropLast(pieces[pieces.count - 1].count)
        for piece in pieces.dropFirst().dropLast() {
            guard let found = rest.range(of: piece) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }
}

/// A temporary folder holding the recipe scripts, aimed at one server.
final class RecipeWorkspace {
    let dir: URL
    let port: UInt16

    /// Writes every script with `localhost:8080` replaced by the server's address.
    init(_ document: RecipeDocument, port: UInt16) throws {
        self.port = port
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("usher-recipes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, text) in document.scripts {
            let file = dir.appendingPathComponent(name)
            try Self.aimed(text, port).write(to: file, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
        }
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    static func aimed(_ text: String, _ port: UInt16) -> String {
        text.replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(port)")
    }

    /// Starts `command` with bash in the folder (its own process group).
    func start(_ command: String, environment: [String: String] = [:]) throws -> ScriptRun {
        var env = ProcessInfo.processInfo.environment
        env["USHER"] = nil
        env.merge(environment) { _, new in new }
        return try ScriptRun(Self.aimed(command, port), in: dir, environment: env)
    }

    /// Runs a transcript's steps in order; records an issue for each that
    /// exits non-zero or prints other lines than the transcript shows.
    func run(_ steps: [RecipeDocument.Step]) throws -> [String] {
        var problems: [String] = []
        for step in steps {
            let run = try start(step.command)
            if step.interrupted {
                if !run.waitForLines(step.expected.count, timeout: 10) {
                    problems.append("$ \(step.command)\nnever printed \(step.expected.count) lines: \(run.lines)")
                }
                run.signal(SIGINT, group: true)
            }
            let status = run.finish(timeout: 10)
            if !step.interrupted, status != 0 {
                problems.append("$ \(step.command)\nexited \(status.map(String.init) ?? "never"): \(run.lines)")
            }
            if !RecipeDocument.matches(run.lines, step.expected) {
                problems.append("$ \(step.command)\nprinted \(run.lines)\nexpected \(step.expected)")
            }
        }
        return problems
    }
}

/// A shell command started by a test, its output (stdout and stderr
/// together) collected as it comes. Spawned with `posix_spawn` rather than
/// `Process` so that it starts as from a terminal: no signal blocked or
/// ignored (a test thread blocks some, and bash cannot trap a signal ignored
/// on entry), in a process group of its own (for Ctrl-C), stdin empty.
final class ScriptRun: Sendable {
    let pid: pid_t
    private let output = Locked(Data())
    private let ended = DispatchSemaphore(value: 0)
    private let exitStatus = Locked<Int32?>(nil)

    init(_ command: String, in dir: URL, environment: [String: String]) throws {
        struct SpawnFailed: Error { let errno: Int32 }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw SpawnFailed(errno: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        // `bash -c COMMAND`, in `dir`.
        let arguments = ["/bin/bash", "-c", #"cd "$0" && exec /bin/bash -c "$1""#, dir.path, command]
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/bin/bash", &actions, &attributes, argv, envp)
        close(fds[1])
        guard result == 0 else {
            close(fds[0])
            throw SpawnFailed(errno: result)
        }
        self.pid = pid
        let reader = fds[0]
        // Reads until every process that holds the pipe (children too) is gone.
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case let n = read(reader, &buffer, buffer.count), n > 0 {
                output.withLock { $0.append(contentsOf: buffer[..<n]) }
            }
            close(reader)
            ended.signal()
        }.start()
    }

    var text: String { output.withLock { String(decoding: $0, as: UTF8.self) } }
    var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// Waits until at least `n` lines are printed.
    func waitForLines(_ n: Int, timeout: Double) -> Bool {
        until(timeout) { self.lines.count >= n }
    }

    /// Sends `signal` to the shell, or to its whole process group as Ctrl-C does.
    func signal(_ signal: Int32, group: Bool = false) {
        kill(group ? -pid : pid, signal)
    }

    /// The exit status (128 + the signal for a shell killed by one) once the
    /// shell and everything it started are gone (the output reached its
    /// end); nil, after killing them, on a timeout.
    func finish(timeout: Double) -> Int32? {
        guard ended.wait(timeout: .now() + timeout) == .success, until(2, { self.reaped() != nil }) else {
            kill(-pid, SIGKILL)
            _ = until(2) { self.reaped() != nil }
            return nil
        }
        return reaped()
    }

    /// The exit status once the shell has ended, reaping it once.
    private func reaped() -> Int32? {
        exitStatus.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    let signal = raw & 0x7f
                    status = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
                }
            }
            return status
        }
    }

    deinit {
        if reaped() == nil {
            kill(-pid, SIGKILL)
            _ = until(2) { self.reaped() != nil }
        }
    }
}

/// Polls `condition` every 10 ms for at most `seconds`.
func until(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    pollBlocking(seconds, every: 10, condition)
}
