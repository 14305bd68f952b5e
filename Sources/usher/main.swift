import Foundation
import UsherAPI
import UsherCore

// usher: read the config, serve until SIGTERM/SIGINT; or check a config, or
// probe a running server's readiness.

let version = "0.1.0"
let usage = """
    usage: usher [serve] [--config PATH]  serve (config: --config, else $USHER_CONFIG, else Config/usher.json);
                                          SIGHUP reloads the config file, SIGTERM/SIGINT stop
           usher check-config [PATH]      validate a config file and exit 0 (valid) or 2 (not)
           usher health URL               exit 0 when GET URL/readyz answers 200 within 3 s, else 1
                                          (URL like http://127.0.0.1:8080; for container health checks)
           usher --version | --help
    environment: USHER_CONFIG, USHER_HOST, USHER_PORT, USHER_TOKEN, USHER_LOG_LEVEL, USHER_CONNECTION_MEMORY_BYTES,
                 USHER_REDIS_URL

    """

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("usher: \(message)\n".utf8))
    exit(status)
}

/// The config file in use: `--config`, else `$USHER_CONFIG`, else
/// `Config/usher.json` when it exists, else none (defaults).
func configFile(_ path: String?) -> String? {
    path ?? ProcessInfo.processInfo.environment["USHER_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        ?? (FileManager.default.fileExists(atPath: "Config/usher.json") ? "Config/usher.json" : nil)
}

func loadConfig(_ path: String?) -> UsherConfig {
    do {
        return try UsherConfig.load(path: path, environment: ProcessInfo.processInfo.environment)
    } catch {
        fail("config error: \(error.description)", status: 2)
    }
}

Service.blockSignals()
var arguments = Array(CommandLine.arguments.dropFirst())
var configPath: String?
var command = "serve"
var healthURL: String?
while let argument = arguments.first {
    arguments.removeFirst()
    switch argument {
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    case "--version":
        print("usher \(version)")
        exit(0)
    case "--config":
        guard let path = arguments.first else { fail("--config needs a path", status: 2) }
        arguments.removeFirst()
        configPath = path
    case "serve":
        command = "serve"
    case "check-config":
        command = "check-config"
        if let path = arguments.first, !path.hasPrefix("-") {
            arguments.removeFirst()
            configPath = path
        }
    case "health":
        command = "health"
        guard let url = arguments.first, !url.hasPrefix("-") else {
            fail("health needs a URL, e.g. http://127.0.0.1:8080", status: 2)
        }
        arguments.removeFirst()
        healthURL = url
    default:
        fail("unknown argument \(argument)\n\(usage)", status: 2)
    }
}

// The probe reads no config: it only asks a running server.
if command == "health", let healthURL { Health.run(healthURL) }

let configFilePath = configFile(configPath)
let config = loadConfig(configFilePath)
// The resources the config declares are created (and their configs checked)
// before anything is bound: a bad one exits 2 with the same message as a bad file.
let app: UsherApp
do {
    app = try UsherApp(config: config, logger: Logger(level: command == "check-config" ? .error : config.logLevel))
} catch {
    fail("config error: \(error.detail)", status: 2)
}
switch command {
case "check-config":
    print("config ok: \(configFilePath ?? "no config file (defaults and environment)")")
    exit(0)
default:
    exit(
        Service.run(app) { () throws(FieldError) in
            try UsherConfig.load(path: configFilePath, environment: ProcessInfo.processInfo.environment)
        })
}
