// The official TypeScript MCP client, @modelcontextprotocol/client 2.x, against a server URL.
//   node client_v2.mjs URL MODE NODE_MODULES
// MODE: `default` (the client's own settings: a 2025-era `initialize`), `pinned-2026` (versionNegotiation pinned
// to 2026-07-28: `server/discover`, then stateless input_required rounds) or `auto` (probe, then the era found);
// `stdio-default` and `stdio-pinned-2026` launch the server by command instead (URL is then a JSON array).
// Lists the tools, runs the demo flows (flows.mjs) with a scripted elicitation handler, prints one JSON report.
import { ScriptedAnswers, flowsFor, load, packageVersion, parseArguments, report, runFlows } from './flows.mjs';

const PINNED = { mode: { pin: '2026-07-28' } };
const MODES = {
    default: undefined,
    'pinned-2026': PINNED,
    auto: { mode: 'auto' },
    'stdio-default': undefined,
    'stdio-pinned-2026': PINNED
};

await report(async () => {
    const { url, stdio, mode, modules } = parseArguments(Object.keys(MODES));
    const sdk = await load(modules, '@modelcontextprotocol/client');
    const options = { capabilities: { elicitation: { form: {}, url: {} } } };
    if (MODES[mode] !== undefined) options.versionNegotiation = MODES[mode];
    const client = new sdk.Client({ name: 'soklet-interop-client-v2', version: '1.0.0' }, options);
    const answers = new ScriptedAnswers();
    client.setRequestHandler('elicitation/create', async request => answers.answer(request.params));
    const transport = stdio
        ? new (await load(modules, '@modelcontextprotocol/client', './stdio')).StdioClientTransport(stdio)
        : new sdk.StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    try {
        const listed = await client.listTools();
        const call = (name, args) => client.callTool({ name, arguments: args });
        const calls = await runFlows(answers, call, flowsFor(stdio !== undefined));
        return {
            client: '@modelcontextprotocol/client',
            clientVersion: packageVersion(modules, '@modelcontextprotocol/client'),
            mode,
            era: client.getProtocolEra() ?? null,
            protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
            sessionId: transport.sessionId !== undefined,
            tools: listed.tools.map(tool => tool.name).sort(),
            calls
        };
    } finally {
        await client.close();
    }
});
