// The official TypeScript MCP client, @modelcontextprotocol/client 2.x, against a server that admits callers by
// OAuth 2.1 bearer token (`soklet serve --auth jwt`).
//   SOKLET_TOKEN=<access token> node client_auth.mjs URL MODE NODE_MODULES
// MODE names how the token is given and the era: `default` (the client's own settings: a 2025-era `initialize`
// and session) or `pinned-2026` (versionNegotiation pinned to 2026-07-28), each with the token from the SDK's own
// hook, the transport's `authProvider: { token }` (AuthProvider.token() is called before every request);
// `headers-default` gives it as a fixed `requestInit.headers.Authorization` instead. With a token, the script lists
// the tools, runs the demo flows (flows.mjs) and prints one JSON report, as client_v2.mjs does.
//
// `no-token-default`, `no-token-pinned-2026`: an authProvider whose token() has none and no onUnauthorized, so the
// transport throws on the server's 401; the report says what the SDK threw, the resource_metadata URL the transport
// read from the challenge, and what a plain fetch of the endpoint without a token gets (status, WWW-Authenticate).
// `bad-token-default`: a token that is not a JWT and an onUnauthorized hook that records the 401 it is handed (the
// transport then retries once and gives up); the report lists what the hook saw.
import { ScriptedAnswers, flowsFor, load, packageVersion, parseArguments, report, runFlows } from './flows.mjs';

const PINNED = { mode: { pin: '2026-07-28' } };
/** mode -> [versionNegotiation, how the token is given: 'provider', 'headers', 'none' or 'bad']. */
const MODES = {
    default: [undefined, 'provider'],
    'pinned-2026': [PINNED, 'provider'],
    'headers-default': [undefined, 'headers'],
    'no-token-default': [undefined, 'none'],
    'no-token-pinned-2026': [PINNED, 'none'],
    'bad-token-default': [undefined, 'bad']
};

/** The transport's options for `how` the token is given; `seen` collects what an onUnauthorized hook is handed. */
function transportOptions(how, token, seen) {
    if (how === 'provider') return { authProvider: { token: async () => token } };
    if (how === 'headers') return { requestInit: { headers: { Authorization: `Bearer ${token}` } } };
    if (how === 'none') return { authProvider: { token: async () => undefined } };
    return {
        authProvider: {
            token: async () => 'not-a-jwt',
            onUnauthorized: async context => {
                seen.push({
                    status: context.response.status,
                    wwwAuthenticate: context.response.headers.get('www-authenticate')
                });
            }
        }
    };
}

/** What a plain POST of an `initialize` without a token gets: its status and WWW-Authenticate header. */
async function plainFetch(url) {
    const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: {
                protocolVersion: '2025-11-25',
                capabilities: {},
                clientInfo: { name: 'soklet-interop-plain-fetch', version: '1.0.0' }
            }
        })
    });
    await response.text();
    return { status: response.status, wwwAuthenticate: response.headers.get('www-authenticate') };
}

await report(async () => {
    const { url, mode, modules } = parseArguments(Object.keys(MODES));
    const [negotiation, how] = MODES[mode];
    const token = process.env.SOKLET_TOKEN;
    if ((how === 'provider' || how === 'headers') && !token) throw new Error('SOKLET_TOKEN holds no token');
    const sdk = await load(modules, '@modelcontextprotocol/client');
    const options = { capabilities: { elicitation: { form: {}, url: {} } } };
    if (negotiation !== undefined) options.versionNegotiation = negotiation;
    const client = new sdk.Client({ name: 'soklet-interop-client-auth', version: '1.0.0' }, options);
    const answers = new ScriptedAnswers();
    client.setRequestHandler('elicitation/create', async request => answers.answer(request.params));
    const seen = [];
    const transport = new sdk.StreamableHTTPClientTransport(new URL(url), transportOptions(how, token, seen));
    const identity = {
        client: '@modelcontextprotocol/client',
        clientVersion: packageVersion(modules, '@modelcontextprotocol/client'),
        mode
    };
    if (how === 'none' || how === 'bad') {
        let error = null;
        try {
            await client.connect(transport);
        } catch (caught) {
            error = {
                name: caught?.constructor?.name ?? typeof caught,
                message: String(caught?.message ?? caught),
                unauthorized: caught instanceof sdk.UnauthorizedError,
                status: caught?.data?.status ?? null
            };
        }
        const connected = error === null;
        if (connected) await client.close();
        return {
            ...identity,
            connected,
            error,
            // Read by the transport from the 401's WWW-Authenticate challenge (its private field: no accessor).
            resourceMetadataUrl: transport._resourceMetadataUrl?.href ?? null,
            onUnauthorized: seen,
            plainFetch: await plainFetch(url)
        };
    }
    await client.connect(transport);
    try {
        const listed = await client.listTools();
        const call = (name, args) => client.callTool({ name, arguments: args });
        const calls = await runFlows(answers, call, flowsFor(false));
        return {
            ...identity,
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
