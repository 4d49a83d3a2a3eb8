"""What OAuth 2.1 bearer-token admission (issue 24) costs a round trip, and what a flood of forged key ids costs.

Run: ``.venv/bin/python benchmarks/auth_admission.py [--round-trips N] [--rounds R] [--flood N] [--quick] [--json]``.

* **CPU per round trip**, by admission policy: the demo's ``catalog.continue`` flow (call -> ``input_required``
  with a sealed state -> retry with the answer and the state -> complete) posted straight into the ASGI app (no
  HTTP server or client, as ``benchmarks/engine_path.py``), process CPU over ``--round-trips`` round trips, the
  contenders interleaved round by round (their order rotated), best of ``--rounds``, each as a ratio against the
  baseline measured in the same run:

  * ``anonymous`` (the baseline): the default :class:`AnonymousAdmission`;
  * ``static bearer``: :class:`BearerTokenAdmission` with one configured token;
  * ``jwt <alg> reused``: :class:`JwtAdmission` and one token for every request (after the first, the
    verified-token cache answers: the hit path), for RS256, ES256 and EdDSA;
  * ``jwt <alg> distinct``: a token of its own for every request (same subject, distinct ``jti``), so every
    request reads the header, finds the key and verifies the signature and the claims: the miss path.

  The key set is a JWKS file (``jwks_file``): no network is in the measure. The tokens are minted before the
  timing starts. ``verify`` is PyJWT's ``jwt.decode`` alone with the same key and checks, per token, for context.
* **Forged-kid flood**: ``--flood`` concurrent admissions of tokens naming key ids the set does not hold, against a
  ``JwksSource`` fetching from a real loopback HTTP server that counts its fetches (``tests/cli/support_tokens.py``),
  with the shortest ``refresh_interval`` (1 s): the fetches of one flood once the interval has passed (expect 1),
  of a second flood right after (expect 0), and of floods kept up for several intervals (expect about one per
  interval); the wall time per forged token.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/cli/support_tokens.py: the tests' token issuer and JWKS server

import jwt  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402
from engine_path import STATE, call_body, headers, retry_body  # noqa: E402
from support.asgi_post import post  # noqa: E402

from soklet_apps.demo import build_registry  # noqa: E402
from soklet_core.keys import ProtectionKey, ProtectionKeyring  # noqa: E402
from soklet_core.mcp import McpServer  # noqa: E402
from soklet_core.mcp.server.admission import (  # noqa: E402
    AdmissionPolicy,
    AdmissionRefused,
    AdmissionRequest,
    BearerTokenAdmission,
)
from soklet_core.mcp.server.auth import JwtAdmission, JwtSettings  # noqa: E402
from soklet_core.protection import ProtectionConfig  # noqa: E402
from soklet_core.protocol import DEFAULT_ENDPOINT_PATH  # noqa: E402
from tests.cli.support_tokens import ALGORITHMS, JwksServer, TokenIssuer  # noqa: E402

SUBJECT = "bench"
STATIC_TOKEN = "static-bench-token-0123456789abcdef"
#: A token's lifetime: longer than any run, so the cache keeps a reused token its full five minutes.
TOKEN_LIFETIME = 3600
BASELINE = "anonymous"

#: Per request: the Authorization header's value (``None``: no header), from the request's running number.
Credentials = Callable[[int], bytes | None]


def app_with(admission: AdmissionPolicy | None) -> Any:
    config = ProtectionConfig(keyring=ProtectionKeyring(ProtectionKey.generate("auth-admission")))
    return McpServer(build_registry(development=True), protection=config, admission=admission).asgi_app()


async def round_trip(app: Any, index: int, credentials: Credentials) -> None:
    """One ``catalog.continue`` call and its retry; request ``2 * index`` and ``2 * index + 1``."""
    head = headers(b"tools/call", b"catalog.continue")
    first, second = credentials(2 * index), credentials(2 * index + 1)
    call_head = head if first is None else [*head, (b"authorization", first)]
    found = STATE.search(await post(app, call_body(2 * index), call_head))
    if found is None:
        raise RuntimeError("the call was not answered input_required with a state")
    retry_head = head if second is None else [*head, (b"authorization", second)]
    done = await post(app, retry_body(2 * index + 1, found.group(1)), retry_head)
    if b'"resultType":"complete"' not in done:
        raise RuntimeError("the retry did not complete")


def mint(issuer: TokenIssuer, alg: str, count: int, label: str) -> list[bytes]:
    """``count`` distinct tokens of one subject, signed with ``alg``, as ``Bearer`` header values."""
    return [
        b"Bearer " + issuer.token(sub=SUBJECT, alg=alg, exp_in=TOKEN_LIFETIME, claims={"jti": f"{label}-{n}"}).encode()
        for n in range(count)
    ]


class Contender:
    """One admission policy's app and the credentials each request of each round carries."""

    def __init__(self, name: str, app: Any, credentials: Callable[[int], Credentials]) -> None:
        self.name = name
        self.app = app
        self.credentials = credentials  # round number (0: the warm-up) -> per-request credentials
        self.best = float("inf")


def none_at_all(_round: int) -> Credentials:
    return lambda _n: None


def the_same(value: bytes) -> Callable[[int], Credentials]:
    """Every request of every round carries ``value``."""
    return lambda _round: lambda _n: value


def each_its_own(per_round: list[list[bytes]]) -> Callable[[int], Credentials]:
    """Request ``n`` of round ``r`` carries ``per_round[r][n]``."""
    return lambda r: per_round[r].__getitem__


def contenders(issuer: TokenIssuer, jwks_file: Path, count: int, rounds: int) -> list[Contender]:
    static = BearerTokenAdmission({STATIC_TOKEN: (SUBJECT, SUBJECT)})
    out = [
        Contender(BASELINE, app_with(None), none_at_all),
        Contender("static bearer", app_with(static), the_same(b"Bearer " + STATIC_TOKEN.encode())),
    ]
    settings = JwtSettings(issuer=issuer.issuer, audience=issuer.audience, jwks_file=jwks_file)
    for alg in ALGORITHMS:
        reused = mint(issuer, alg, 1, f"{alg}-reused")[0]
        out.append(Contender(f"jwt {alg} reused", app_with(settings.policy()), the_same(reused)))
    for alg in ALGORITHMS:
        # Every request of every round a token never seen before (the warm-up round included).
        per_round = [mint(issuer, alg, 2 * count, f"{alg}-{r}") for r in range(rounds + 1)]
        out.append(Contender(f"jwt {alg} distinct", app_with(settings.policy()), each_its_own(per_round)))
    return out


async def measure(runners: list[Contender], count: int, rounds: int) -> None:
    for runner in runners:  # warm-up: lazily built parts, the key file's first read
        credentials = runner.credentials(0)
        for index in range(count):
            await round_trip(runner.app, index, credentials)
    for r in range(1, rounds + 1):
        shift = (r - 1) % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            credentials = runner.credentials(r)
            gc.collect()  # each contender's round starts from the same collector state
            started = time.process_time()
            for index in range(count):
                await round_trip(runner.app, index, credentials)
            runner.best = min(runner.best, (time.process_time() - started) / count)


def verify_alone(issuer: TokenIssuer, count: int) -> dict[str, float]:
    """µs of ``jwt.decode`` per token, with the policy's key type and checks, best of 3."""
    out: dict[str, float] = {}
    for alg in ALGORITHMS:
        key = jwt.PyJWK(issuer.jwk(alg), algorithm=alg)
        token = issuer.token(sub=SUBJECT, alg=alg, exp_in=TOKEN_LIFETIME)
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for _ in range(count):
                jwt.decode(
                    token,
                    key,
                    algorithms=[alg],
                    audience=issuer.audience,
                    issuer=issuer.issuer,
                    leeway=30,
                    options={"require": ["exp", "iss", "aud"]},
                )
            best = min(best, (time.process_time() - started) / count)
        out[alg] = round(best * 1e6, 1)
    return out


def forged_tokens(issuer: TokenIssuer, count: int) -> list[str]:
    """``count`` tokens signed by a key the issuer never published, each naming a key id of its own."""
    forger = ed25519.Ed25519PrivateKey.generate()
    claims = {"sub": SUBJECT, "iss": issuer.issuer, "aud": issuer.audience, "exp": int(time.time()) + 3600}
    return [jwt.encode(claims, forger, algorithm="EdDSA", headers={"kid": f"forged-{n}"}) for n in range(count)]


async def flood_once(policy: JwtAdmission, tokens: list[str]) -> tuple[float, float, dict[str, int]]:
    """Admit every token at once; (wall s, CPU s, refusals by reason)."""
    requests = [AdmissionRequest(DEFAULT_ENDPOINT_PATH, {"authorization": f"Bearer {t}"}) for t in tokens]
    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(policy.admit(r) for r in requests), return_exceptions=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    reasons: dict[str, int] = {}
    for result in results:
        key = result.reason.value if isinstance(result, AdmissionRefused) else type(result).__name__
        reasons[key] = reasons.get(key, 0) + 1
    return wall, cpu, reasons


async def flood(issuer: TokenIssuer, count: int, intervals: int) -> dict[str, Any]:
    tokens = forged_tokens(issuer, count)
    interval = timedelta(seconds=1)
    with JwksServer(issuer.jwks()) as server:
        settings = JwtSettings(
            issuer=issuer.issuer, audience=issuer.audience, jwks_url=server.url, refresh_interval=interval
        )
        policy = settings.policy()
        try:
            good = AdmissionRequest(DEFAULT_ENDPOINT_PATH, {"authorization": f"Bearer {issuer.token(sub=SUBJECT)}"})
            await policy.admit(good)
            loaded = server.fetches
            await asyncio.sleep(interval.total_seconds() * 1.1)  # past the interval since the first load
            before = server.fetches
            wall, cpu, reasons = await flood_once(policy, tokens)
            first = server.fetches - before
            before = server.fetches
            second_wall, _, second_reasons = await flood_once(policy, tokens)
            second = server.fetches - before
            # Kept up: flood after flood for `intervals` refresh intervals.
            before, started, floods = server.fetches, time.perf_counter(), 0
            while time.perf_counter() - started < intervals * interval.total_seconds():
                await flood_once(policy, tokens)
                floods += 1
                await asyncio.sleep(0.05)
            kept_seconds = time.perf_counter() - started
            kept = server.fetches - before
            still = (await policy.admit(good)).identity.subject == SUBJECT
        finally:
            await policy.aclose()
    return {
        "tokens": count,
        "refresh_interval_s": interval.total_seconds(),
        "fetches_initial_load": loaded,
        "fetches_first_flood": first,
        "fetches_second_flood_right_after": second,
        "refusals_first_flood": reasons,
        "refusals_second_flood": second_reasons,
        "wall_us_per_forged_token": round(wall / count * 1e6, 1),
        "cpu_us_per_forged_token": round(cpu / count * 1e6, 1),
        "wall_us_per_forged_token_second_flood": round(second_wall / count * 1e6, 1),
        "kept_up_floods": floods,
        "kept_up_seconds": round(kept_seconds, 2),
        "kept_up_fetches": kept,
        "valid_token_admitted_after": still,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--round-trips", type=int, default=200, help="round trips per round (default 200)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds; the best is kept (default 20)")
    parser.add_argument("--flood", type=int, default=1000, help="forged tokens admitted at once (default 1000)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 50 round trips, 2 rounds, 2 intervals")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    count, rounds, intervals = args.round_trips, args.rounds, 4
    if args.quick:
        count, rounds, intervals = 50, 2, 2
    issuer = TokenIssuer(prefix="bench")
    with tempfile.TemporaryDirectory() as folder:
        jwks_file = issuer.write_jwks(Path(folder) / "jwks.json")
        minted = time.perf_counter()
        runners = contenders(issuer, jwks_file, count, rounds)
        minting = time.perf_counter() - minted
        asyncio.run(measure(runners, count, rounds))
    baseline = next(runner.best for runner in runners if runner.name == BASELINE)
    by_name = {runner.name: runner.best for runner in runners}
    results: dict[str, Any] = {
        "round_trips": count,
        "rounds": rounds,
        "minting_s": round(minting, 1),
        "cpu_us_per_round_trip": {name: round(best * 1e6, 1) for name, best in by_name.items()},
        "ratio_to_anonymous": {name: round(best / baseline, 3) for name, best in by_name.items()},
        # Two requests per round trip: what one verification adds to a request, the miss path less the hit path.
        "verification_us_per_request": {
            alg: round((by_name[f"jwt {alg} distinct"] - by_name[f"jwt {alg} reused"]) / 2 * 1e6, 1)
            for alg in ALGORITHMS
        },
        "jwt_decode_alone_us": verify_alone(issuer, 200 if args.quick else 2000),
        "forged_kid_flood": asyncio.run(flood(issuer, args.flood, intervals)),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{count} round trips x {rounds} rounds (tokens minted in {results['minting_s']} s)")
    print(f"{'admission':<22}{'CPU us/round trip':>18}{'vs anonymous':>14}")
    for name, best in by_name.items():
        print(f"{name:<22}{best * 1e6:>18.1f}{best / baseline:>13.3f}x")
    for alg in ALGORITHMS:
        print(
            f"{alg}: verification adds {results['verification_us_per_request'][alg]} us per request"
            f" (jwt.decode alone {results['jwt_decode_alone_us'][alg]} us)"
        )
    fl = results["forged_kid_flood"]
    print(
        f"forged-kid flood of {fl['tokens']} (refresh interval {fl['refresh_interval_s']} s):"
        f" {fl['fetches_first_flood']} fetch(es), then {fl['fetches_second_flood_right_after']} right after;"
        f" {fl['wall_us_per_forged_token']} us wall ({fl['cpu_us_per_forged_token']} us CPU) per forged token;"
        f" refusals {fl['refusals_first_flood']}"
    )
    print(
        f"kept up: {fl['kept_up_floods']} floods over {fl['kept_up_seconds']} s -> {fl['kept_up_fetches']} fetches;"
        f" a valid token still admitted: {fl['valid_token_admitted_after']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
