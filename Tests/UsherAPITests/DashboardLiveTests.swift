import Foundation
import HTTPTestClient
import TestSupport
import Testing

@testable import UsherAPI

/// `GET /`, `/dashboard.js`, `/dashboard.css` on the real server, and the
/// read-only `?include=definition` the dashboard uses to draw machines.
/// `scripts/browser-check` drives the page itself in headless Chromium.
@Suite struct DashboardLiveTests {
    static let policy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    @Test func pageScriptAndStyleWithTheirTypesAndPolicy() throws {
        let s = try AppTester()
        for (path, type) in [
            ("/", "text/html; charset=utf-8"), ("/dashboard.js", "text/javascript; charset=utf-8"),
            ("/dashboard.css", "text/css; charset=utf-8"),
        ] {
            let response = try s.call("GET", path)
            #expect(response.status == 200, "\(path)")
            #expect(response.headers["content-type"] == type, "\(path)")
            #expect(response.headers["content-security-policy"] == Self.policy, "\(path)")
            #expect(response.headers["x-content-type-options"] == "nosniff", "\(path)")
            #expect(response.body.count > 1000, "\(path)")
        }
        let page = try s.call("GET", "/").text
        #expect(page.contains(#"<script src="/dashboard.js" defer></script>"#))
        #expect(page.contains(#"<link rel="stylesheet" href="/dashboard.css">"#))
        // No inline script, style or event handler: the policy would block them.
        #expect(!page.contains("<script>") && !page.contains("<style") && !page.contains(" style="))
        #expect(page.range(of: #"\son[a-z]+\s*="#, options: .regularExpression) == nil)
        // Nothing from elsewhere: no CDN, no outside fonts (the SVG namespace is a name, not a fetch).
        for text in [page, try s.call("GET", "/dashboard.js").text, try s.call("GET", "/dashboard.css").text] {
            let own = text.replacingOccurrences(of: "http://www.w3.org/2000/svg", with: "")
            #expect(!own.contains("http://") && !own.contains("https://") && !own.contains("//cdn"))
            #expect(!own.contains("innerHTML") && !own.contains("@import") && !own.contains("url("))
        }
        #expect(try s.call("HEAD", "/").status == 200)
        #expect(try s.call("POST", "/").status == 405)
        #expect(try s.call("GET", "/dashboard.mjs").status == 404)
    }

    /// The three files are served byte for byte as they are in the source
    /// tree: SwiftPM compiled them in, nothing is read at run time.
    @Test func servedFilesAreTheSourceFiles() throws {
        let s = try AppTester()
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/UsherAPI/Dashboard").standardized
        for (path, file) in [
            ("/", "dashboard.html"), ("/dashboard.js", "dashboard.js"), ("/dashboard.css", "dashboard.css"),
        ] {
            let source = try Data(contentsOf: folder.appendingPathComponent(file))
            #expect(try s.call("GET", path).body == source, "\(path)")
        }
    }

    @Test func openWithATokenWhileV1NeedsIt() throws {
        let s = try AppTester(#"{"auth_token": "secret", "queues": {"q": {}}}"#)
        for path in ["/", "/dashboard.js", "/dashboard.css"] {
            #expect(try s.call("GET", path).status == 200, "\(path)")
        }
        #expect(try s.call("GET", "/v1/queues").status == 401)
        #expect(try s.call("GET", "/v1/queues/q").status == 401)
        #expect(try s.call("GET", "/v1/events").status == 401)
        #expect(try s.call("GET", "/v1/queues", headers: ["Authorization": "Bearer secret"]).status == 200)
    }

    @Test func machineStateWithItsDefinitionOnRequest() throws {
        let s = try AppTester(#"{"machines": {"player": {"definition": "player"}}}"#)
        let plain = try s.call("GET", "/v1/machines/player")
        #expect(plain.json["definition"] as? String == "player")
        #expect(plain.json["definition_detail"] == nil)

        let detailed = try s.call("GET", "/v1/machines/player?include=definition")
        #expect(detailed.status == 200)
        #expect(detailed.json["definition"] as? String == "player")
        let definition = try #require(detailed.json["definition_detail"] as? [String: Any])
        #expect(definition["initial"] as? String == "NotReady")
        #expect(definition["states"] as? [String] == ["NotReady", "Ready", "Running"])
        let transitions = try #require(definition["transitions"] as? [[String: Any]])
        #expect(transitions.map { $0["event"] as? String } == ["prepare", "start", "teardown"])
        #expect(detailed.headers["etag"] == plain.headers["etag"])

        let bad = try s.call("GET", "/v1/machines/player?include=everything")
        #expect(bad.status == 400)
        #expect(bad.code == "bad_request")
        #expect(bad.json["field"] as? String == "include")

        // With a long-poll that ends on a transition, the answer carries it too.
        let version = try #require(plain.json["version"] as? Int)
        #expect(try s.call("POST", "/v1/machines/player/events/prepare").status == 200)
        let waited = try s.call("GET", "/v1/machines/player?include=definition&wait=1&version=\(version)")
        #expect(waited.json["state"] as? String == "Ready")
        #expect(waited.json["definition_detail"] is [String: Any])
    }
}
