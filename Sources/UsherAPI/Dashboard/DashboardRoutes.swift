import HTTPServer

/// `GET /`: the live dashboard (docs/dashboard.md), with its script and
/// style sheet as separate same-origin files so the Content-Security-Policy
/// can forbid inline script and style.
///
/// The three files are Swift string literals compiled into the binary
/// (`DashboardPage`, `DashboardScript`, `DashboardStyle`): no build step, no
/// CDN, no outside fonts. The responses are built once. They are open, like
/// /healthz: the page must load to ask for a token; the data it shows comes
/// from `/v1`, which the token guards.
enum DashboardRoutes {
    /// The policy sent with all three files.
    static let contentSecurityPolicy = [
        "default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
        "img-src 'self' data:", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
    ].joined(separator: "; ")

    /// Headers every dashboard file carries (after its `Content-Type`).
    static let headers: [(name: String, value: String)] = [
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-cache"),
    ]

    /// `GET /`.
    static let page = HTTPResponse(
        status: 200, contentType: "text/html; charset=utf-8", text: DashboardPage.html, headers: headers)
    /// `GET /dashboard.js`.
    static let script = HTTPResponse(
        status: 200, contentType: "text/javascript; charset=utf-8", text: DashboardScript.js, headers: headers)
    /// `GET /dashboard.css`.
    static let style = HTTPResponse(
        status: 200, contentType: "text/css; charset=utf-8", text: DashboardStyle.css, headers: headers)

    static func add(to router: inout Router<Route>) {
        router.add("GET", "/") { _ throws(APIError) in .respond(page) }
        router.add("GET", "/dashboard.js") { _ throws(APIError) in .respond(script) }
        router.add("GET", "/dashboard.css") { _ throws(APIError) in .respond(style) }
    }
}
