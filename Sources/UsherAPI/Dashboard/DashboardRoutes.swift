import HTTPServer

/// `GET /`: the live dashboard (docs/dashboard.md), with its script and
/// style sheet as separate same-origin files so the Content-Security-Policy
/// can forbid inline script and style.
///
/// The three files (`dashboard.html`, `.js`, `.css` beside this one) are
/// compiled into the binary by SwiftPM (`.embedInCode` in Package.swift, read
/// through `PackageResources`): nothing is read from disk at run time, no
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
    ]

    /// `GET /`.
    static let page = file("text/html; charset=utf-8", PackageResources.dashboard_html)
    /// `GET /dashboard.js`.
    static let script = file("text/javascript; charset=utf-8", PackageResources.dashboard_js)
    /// `GET /dashboard.css`.
    static let style = file("text/css; charset=utf-8", PackageResources.dashboard_css)

    /// One embedded file as an answer, with the shared headers and its `ETag`.
    private static func file(_ contentType: String, _ bytes: [UInt8]) -> FixedAnswer {
        FixedAnswer(contentType: contentType, headers: headers, body: bytes)
    }

    static func add(to router: inout Router<Route>) {
        router.add("GET", "/") { call throws(APIError) in .respond(page.answer(call.request)) }
        router.add("GET", "/dashboard.js") { call throws(APIError) in .respond(script.answer(call.request)) }
        router.add("GET", "/dashboard.css") { call throws(APIError) in .respond(style.answer(call.request)) }
    }
}
