/// The dashboard's HTML: a shell that `DashboardScript` fills from `/v1`.
/// No inline script or style (the Content-Security-Policy forbids both).
enum DashboardPage {
    static let html = ##"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <meta name="referrer" content="no-referrer">
        <title>Usher</title>
        <link rel="icon" href="data:,">
        <link rel="stylesheet" href="/dashboard.css">
        <script src="/dashboard.js" defer></script>
        </head>
        <body>
        <header class="top">
          <h1>Usher</h1>
          <nav class="jump" aria-label="Resource kinds">
            <a href="#queues">Queues</a><a href="#windows">Windows</a><a href="#pools">Pools</a><a href="#pipelines">Pipelines</a><a href="#machines">Machines</a>
          </nav>
          <span id="status" class="status" data-state="connecting" role="status">connecting…</span>
        </header>
        <div id="banner" class="banner" role="alert" hidden></div>
        <form id="token-form" class="token" hidden>
          <label for="token-input">This server needs a token. It is kept for this tab only and sent as a Bearer header.</label>
          <div class="token-row">
            <input id="token-input" type="password" autocomplete="off" spellcheck="false" placeholder="token" required>
            <button type="submit">Connect</button>
          </div>
          <p id="token-error" class="token-error" hidden>That token was refused.</p>
        </form>
        <main id="main">
          <section class="kind" id="queues" data-kind="queue">
            <h2>Queues <span class="kind-count"></span></h2>
            <p class="empty" hidden>No queues.</p>
            <div class="cards"></div>
          </section>
          <section class="kind" id="windows" data-kind="window">
            <h2>Windows <span class="kind-count"></span></h2>
            <p class="empty" hidden>No windows.</p>
            <div class="cards"></div>
          </section>
          <section class="kind" id="pools" data-kind="pool">
            <h2>Pools <span class="kind-count"></span></h2>
            <p class="empty" hidden>No pools.</p>
            <div class="cards"></div>
          </section>
          <section class="kind" id="pipelines" data-kind="pipeline">
            <h2>Pipelines <span class="kind-count"></span></h2>
            <p class="empty" hidden>No pipelines.</p>
            <div class="cards"></div>
          </section>
          <section class="kind" id="machines" data-kind="machine">
            <h2>Machines <span class="kind-count"></span></h2>
            <p class="empty" hidden>No machines.</p>
            <div class="cards"></div>
          </section>
        </main>
        <footer class="foot">Read-only view of this Usher server ·
          <a href="/openapi.json">OpenAPI</a> · <a href="/metrics">metrics</a> · <span id="updated"></span></footer>
        </body>
        </html>

        """##
}
