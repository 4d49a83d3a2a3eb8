// The v1 TypeScript MCP SDK, @modelcontextprotocol/sdk 1.x (what most shipped hosts embed), against a server URL.
//   node client_v1.mjs URL default NODE_MODULES      (Streamable HTTP)
//   node client_v1.mjs '["soklet","serve","--stdio"]' stdio NODE_MODULES      (launch the server by command)
// It speaks only the 2025 era: `initialize`, a session (Mcp-Session-Id over HTTP), server-to-client elicitation
// requests.
// Lists the tools, runs the demo flows (flows.mjs) with a scripted elicitation handler, prints one JSON report.
import { ScriptedAnswers, flowsFor, load, packageVersion, parseArguments, report, runFlows } from './flows.mjs';

const PACKAGE = '@modelcontextprotocol/sdk';

await report(async () => {
    const { url, stdio, mode, modules } = parseArguments(['default', 'stdio']);
    const { Client } = await load(modules, PACKAGE, './client/index.js');
    const { StreamableHTTPClientTransport } = await load(modules, PACKAGE, './client/streamableHttp.js');
    const { ElicitRequestSchema } = await load(modules, PACKAGE, './types.js');
    const client = new Client(
        { name: 'soklet-interop-client-v1', version: '1.0.0' },
        { capabilities: { elicitation: { form: {}, url: {} } } }
    );
    const answers = new ScriptedAnswers();
    client.setRequestHandler(ElicitRequestSchema, async request => answers.answer(request.params));
    const transport = stdio
        ? new (await load(modules, PACKAGE, './client/stdio.js')).StdioClientTransport(stdio)
        : new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    try {
        const listed = await client.listTools();
        const call = (name, args) => client.callTool({ name, arguments: args });
        const calls = await runFlows(answers, call, flowsFor(stdio !== undefined));
        return {
            client: PACKAGE,
            clientVersion: packageVersion(modules, PACKAGE),
            mode,
            era: 'legacy',
            protocolVersion: transport.protocolVersion ?? null, // the HTTP transport's; none on stdio
            sessionId: transport.sessionId !== undefined,
            tools: listed.tools.map(tool => tool.name).sort(),
            calls
        };
    } finally {
        await client.close();
    }
});
