/// The dashboard's style sheet, served as `/dashboard.css`: light and dark,
/// laptop and phone widths, system fonts only. Edit it here; there is no build step.
enum DashboardStyle {
    static let css = ##"""
        /* Usher dashboard. System fonts only (sidecars often have no internet). */
        :root {
          color-scheme: light dark;
          --bg: #f5f6f8; --card: #ffffff; --fg: #1d2430; --muted: #5d6878; --line: #e1e5eb; --soft: #eef1f5;
          --accent: #2f5fd0; --accent-soft: #e4ecfc; --ok: #1f7a4a; --ok-soft: #e2f4ea; --warn: #9a5b00; --warn-soft: #fcf0dc;
          --bad: #b42318; --bad-soft: #fde8e6; --shadow: 0 1px 2px rgba(16, 24, 40, .06), 0 1px 3px rgba(16, 24, 40, .08);
          --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
        }
        @media (prefers-color-scheme: dark) {
          :root {
            --bg: #0f1319; --card: #171c24; --fg: #e4e8ee; --muted: #98a2b3; --line: #2a313c; --soft: #1f2530;
            --accent: #7aa2ff; --accent-soft: #1d2a4a; --ok: #5fd49a; --ok-soft: #143223; --warn: #f5b454; --warn-soft: #3a2a10;
            --bad: #ff8a80; --bad-soft: #3d1a18; --shadow: 0 1px 2px rgba(0, 0, 0, .5);
          }
        }
        * { box-sizing: border-box; }
        html { -webkit-text-size-adjust: 100%; }
        body {
          margin: 0; background: var(--bg); color: var(--fg);
          font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
        }
        a { color: var(--accent); }
        [hidden] { display: none !important; }
        body[data-mode="locked"] main, body[data-mode="locked"] .jump { display: none; }

        .top {
          position: sticky; top: 0; z-index: 2; display: flex; align-items: center; gap: 16px; flex-wrap: wrap;
          padding: 10px 20px; background: var(--card); border-bottom: 1px solid var(--line);
        }
        .top h1 { margin: 0; font-size: 18px; letter-spacing: .02em; }
        .jump { display: flex; gap: 4px; flex-wrap: wrap; flex: 1; }
        .jump a { color: var(--muted); text-decoration: none; padding: 3px 8px; border-radius: 6px; font-size: 13px; }
        .jump a:hover { background: var(--soft); color: var(--fg); }
        .status {
          display: inline-flex; align-items: center; gap: 6px; font-size: 12px; font-weight: 600; padding: 3px 10px;
          border-radius: 999px; background: var(--soft); color: var(--muted);
        }
        .status::before { content: ""; width: 8px; height: 8px; border-radius: 50%; background: currentColor; }
        .status[data-state="live"] { background: var(--ok-soft); color: var(--ok); }
        .status[data-state="polling"] { background: var(--warn-soft); color: var(--warn); }
        .status[data-state="offline"], .status[data-state="locked"] { background: var(--bad-soft); color: var(--bad); }

        .banner {
          margin: 12px 20px 0; padding: 10px 14px; border-radius: 8px; background: var(--warn-soft); color: var(--warn);
          border: 1px solid currentColor; font-weight: 600;
        }
        .token {
          max-width: 460px; width: calc(100% - 24px); margin: 40px auto; padding: 20px; background: var(--card); border: 1px solid var(--line);
          border-radius: 12px; box-shadow: var(--shadow);
        }
        .token label { display: block; margin-bottom: 10px; }
        .token-row { display: flex; gap: 8px; }
        .token input {
          flex: 1; min-width: 0; font: inherit; padding: 8px 10px; border-radius: 8px; border: 1px solid var(--line);
          background: var(--bg); color: var(--fg);
        }
        .token button {
          font: inherit; font-weight: 600; padding: 8px 14px; border: 0; border-radius: 8px; background: var(--accent);
          color: var(--card); cursor: pointer;
        }
        .token-error { color: var(--bad); margin: 10px 0 0; }

        main { padding: 8px 20px 24px; }
        .kind h2 { font-size: 15px; margin: 20px 0 10px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
        .kind-count {
          display: inline-block; min-width: 22px; padding: 0 7px; margin-left: 4px; border-radius: 999px; background: var(--soft);
          font-size: 12px; text-align: center; letter-spacing: 0;
        }
        .empty { color: var(--muted); margin: 0; }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 380px), 1fr)); gap: 14px; align-items: start; }
        .card {
          background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 14px 16px; box-shadow: var(--shadow);
          min-width: 0;
        }
        .card.pulse { animation: pulse 1s ease-out; }
        @keyframes pulse { from { box-shadow: 0 0 0 3px var(--accent); } to { box-shadow: var(--shadow); } }
        .card-head { display: flex; align-items: baseline; gap: 10px; flex-wrap: wrap; margin-bottom: 10px; }
        .card-head h3 { margin: 0; font-size: 16px; font-family: var(--mono); word-break: break-all; }
        .card-head .sub { color: var(--muted); font-size: 12px; }

        .stats { display: grid; grid-template-columns: repeat(4, 1fr); gap: 6px; margin: 0 0 10px; }
        .stat { background: var(--soft); border-radius: 8px; padding: 4px 10px; min-width: 0; }
        .stat dt { font-size: 11px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
        .stat dd { margin: 0; font-size: 18px; font-weight: 650; font-variant-numeric: tabular-nums; }
        .stat.full dd { color: var(--warn); }
        .stat.bad dd { color: var(--bad); }

        .block { margin: 10px 0; }
        .block.inline { display: flex; gap: 8px; align-items: baseline; }
        .block.inline h4 { margin: 0; }
        .block h4 { margin: 0 0 6px; font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; font-weight: 600; }
        .none { color: var(--muted); margin: 0; font-style: italic; }
        .more { color: var(--muted); margin: 4px 0 0; font-size: 12px; }
        .totals { display: flex; flex-wrap: wrap; gap: 2px 12px; margin: 10px 0 0; padding-top: 6px; border-top: 1px solid var(--line);
          color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }

        .scroll { overflow-x: auto; }
        table { width: 100%; border-collapse: collapse; font-size: 13px; }
        th { text-align: left; font-weight: 600; color: var(--muted); font-size: 11px; padding: 4px 6px; border-bottom: 1px solid var(--line); white-space: nowrap; }
        td { padding: 5px 6px; border-bottom: 1px solid var(--soft); vertical-align: top; overflow-wrap: break-word; }
        td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
        .id, .fence, .key, .action, .fname { font-family: var(--mono); font-size: 12px; }
        .fence { color: var(--muted); }
        td .id { display: block; white-space: nowrap; }
        td .fence { display: block; font-size: 11px; white-space: nowrap; }
        .key::after { content: " / "; color: var(--muted); }
        .key:last-child::after { content: ""; }
        .payload {
          display: block; font-family: var(--mono); font-size: 11px; color: var(--muted); white-space: pre-wrap; overflow-wrap: break-word; max-width: 28ch;
        }

        .showing { border-left: 4px solid var(--accent); background: var(--accent-soft); border-radius: 8px; padding: 10px 12px; }
        .showing.empty-slot { border-left-color: var(--line); background: var(--soft); }
        .showing .title { margin: 0; font-size: 16px; font-weight: 650; overflow-wrap: anywhere; }
        .showing .message { margin: 4px 0 0; overflow-wrap: anywhere; }
        .showing .meta { margin: 6px 0 0; font-size: 12px; color: var(--muted); }
        td .title { display: block; font-weight: 600; }
        td .message { display: block; color: var(--muted); font-size: 12px; }

        .tiles { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(120px, 1fr)); gap: 8px; }
        .tile { border-radius: 8px; padding: 8px 10px; border: 1px solid var(--line); display: flex; flex-direction: column; gap: 1px; min-width: 0; }
        .tile.free { background: var(--ok-soft); border-color: transparent; }
        .tile.leased { background: var(--warn-soft); border-color: transparent; }
        .tile-id { font-family: var(--mono); font-weight: 650; overflow-wrap: anywhere; }
        .tile-status { font-size: 11px; text-transform: uppercase; letter-spacing: .05em; font-weight: 600; }
        .tile.free .tile-status { color: var(--ok); }
        .tile.leased .tile-status { color: var(--warn); }
        .holder { overflow-wrap: anywhere; }
        .tile-exp { font-size: 12px; color: var(--muted); }

        .meter { height: 6px; border-radius: 3px; background: var(--soft); overflow: hidden; }
        .meter-fill { display: block; height: 100%; background: var(--accent); border-radius: 3px; }
        .meter-text { margin: 4px 0 0; font-size: 12px; color: var(--muted); }
        .filters { margin: 0; padding: 0; list-style: none; }
        .filters li { display: flex; gap: 8px; align-items: baseline; padding: 4px 0; border-bottom: 1px solid var(--soft); flex-wrap: wrap; }
        .prio { font-variant-numeric: tabular-nums; background: var(--soft); border-radius: 6px; padding: 0 6px; font-size: 12px; font-weight: 600; }
        .fdesc { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
        .source p { margin: 0; }
        .error-text { color: var(--bad); font-size: 12px; }
        .meta { color: var(--muted); font-size: 12px; }

        .current-state { margin: 0 0 8px; color: var(--muted); font-size: 13px; }
        .state-pill { display: inline-block; padding: 2px 10px; border-radius: 999px; background: var(--accent); color: var(--card); font-weight: 650; font-family: var(--mono); font-size: 13px; }
        .diagram { background: var(--soft); border-radius: 8px; padding: 6px; }
        .machine-svg { display: block; width: 100%; height: auto; max-height: 260px; }
        .machine-svg .node rect { fill: var(--card); stroke: var(--muted); stroke-width: 1.2; }
        .machine-svg .node.initial rect { stroke-width: 2.2; }
        .machine-svg .node text { fill: var(--fg); font: 600 12px var(--mono); }
        .machine-svg .node.current rect { fill: var(--accent); stroke: var(--accent); }
        .machine-svg .node.current text { fill: var(--card); }
        .machine-svg .edge { fill: none; stroke: var(--muted); stroke-width: 1.3; stroke-dasharray: 4 3; opacity: .75; }
        .machine-svg .edge.head { fill: var(--muted); stroke: none; }
        .machine-svg .edge.allowed { stroke: var(--accent); stroke-width: 2; stroke-dasharray: none; opacity: 1; }
        .machine-svg .edge.allowed.head { fill: var(--accent); stroke: none; }
        .machine-svg .elabel { fill: var(--muted); font: 11px system-ui, sans-serif; paint-order: stroke; stroke: var(--soft); stroke-width: 4px; stroke-linejoin: round; }
        .machine-svg .elabel.allowed { fill: var(--accent); font-weight: 700; }
        .chips { display: flex; gap: 6px; flex-wrap: wrap; margin: 0; }
        .chip { font-family: var(--mono); font-size: 12px; padding: 2px 9px; border-radius: 999px; border: 1px solid var(--accent); color: var(--accent); }
        .history { margin: 0; padding: 0; list-style: none; font-size: 13px; }
        .history li { display: flex; gap: 8px; flex-wrap: wrap; padding: 3px 0; border-bottom: 1px solid var(--soft); }
        .history .event { font-family: var(--mono); font-weight: 600; }
        .history .from-to { color: var(--muted); }
        .history .when { margin-left: auto; color: var(--muted); font-size: 12px; }

        .foot { padding: 16px 20px 28px; color: var(--muted); font-size: 12px; }

        /* Wide screens: the kinds flow in columns, so more of them fit on a screen. */
        @media (min-width: 1100px) {
          main { column-count: 2; column-gap: 16px; padding-top: 14px; }
          .kind h2 { break-after: avoid; margin: 2px 0 10px; }
          .cards { display: block; }
          .card { break-inside: avoid; margin-bottom: 14px; }
          .card:last-child { margin-bottom: 24px; }
        }
        @media (min-width: 1200px) { main { column-count: 3; } }
        @media (min-width: 1900px) { main { column-count: 4; } }
        @media (max-width: 600px) {
          .top { padding: 8px 12px; gap: 8px; }
          .jump { order: 3; flex-basis: 100%; }
          main { padding: 4px 12px 16px; }
          .banner { margin: 10px 12px 0; }
          .stat { padding: 4px 7px; }
          .stat dt { font-size: 10px; letter-spacing: .02em; }
          .stat dd { font-size: 16px; }
          .card { padding: 12px; }
        }

        """##
}
