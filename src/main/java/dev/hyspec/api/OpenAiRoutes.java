package dev.hyspec.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.subscription.Cancellable;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.ArrayList;
import java.util.List;
import org.jboss.logging.Logger;

/**
 * {@code POST /v1/completions} and {@code POST /v1/chat/completions}: JSON in, JSON or SSE out.
 * Plain Vert.x routes rather than JAX-RS, so that the SSE framing is exactly OpenAI's
 * ({@code data: {chunk}}, then {@code data: [DONE]}), the status can still change until the engine
 * admits the request, and a closed connection is seen at once (it cancels the stream, which aborts
 * the request in the engine).
 */
@ApplicationScoped
public class OpenAiRoutes {
    private static final Logger LOG = Logger.getLogger(OpenAiRoutes.class);
    private static final long BODY_LIMIT = 32L << 20;

    private final GenerationService service;
    private final ObjectMapper json;

    public OpenAiRoutes(GenerationService service, ObjectMapper json) {
        this.service = service;
        this.json = json;
    }

    void init(@Observes Router router) {
        router.post("/v1/completions").handler(BodyHandler.create().setBodyLimit(BODY_LIMIT))
                .handler(rc -> handle(rc, false));
        router.post("/v1/chat/completions").handler(BodyHandler.create().setBodyLimit(BODY_LIMIT))
                .handler(rc -> handle(rc, true));
        for (String path : new String[] {"/v1/completions", "/v1/chat/completions"}) {
            router.route(path).handler(rc -> sendError(rc, new ApiException(405, "invalid_request_error", null,
                    "method_not_allowed", rc.request().method() + " is not allowed on " + path + "; use POST", 0)));
        }
    }

    private void handle(RoutingContext rc, boolean chat) {
        JsonNode body;
        try {
            body = json.readTree(rc.body().asString());
        } catch (JsonProcessingException e) {
            ApiException bad = ApiException.badRequest(null, "the request body is not valid JSON: "
                    + e.getOriginalMessage());
            service.refused(bad);
            sendError(rc, bad);
            return;
        }
        Context ctx = Vertx.currentContext();
        // reading, templating and tokenizing can take a while for long prompts: off the event loop
        rc.vertx().<GenerationService.Prepared>executeBlocking(() -> {
            int k = service.defaultSpecTokens();
            ApiRequest r = chat ? ApiRequestReader.chat(body, k) : ApiRequestReader.completion(body, k);
            return service.prepare(r);
        }, false).onComplete(ar -> {
            if (ar.failed()) {
                ApiException e = GenerationService.translate(ar.cause());
                service.refused(e);
                sendError(rc, e);
            } else if (ar.result().api().stream()) {
                new SseExchange(rc, ctx, ar.result()).start();
            } else {
                new JsonExchange(rc, ctx, ar.result()).start();
            }
        });
    }

    void sendError(RoutingContext rc, RuntimeException failure) {
        ApiException e = failure instanceof ApiException a ? a
                : new ApiException(500, "server_error", null, null, "internal error: " + failure, 0);
        if (e.status() >= 500 && e.status() != 503) {
            LOG.error("request failed", failure);
        }
        HttpServerResponse res = rc.response();
        if (res.ended() || res.closed()) {
            return;
        }
        res.setStatusCode(e.status()).putHeader("content-type", "application/json");
        if (e.retryAfterSeconds() > 0) {
            res.putHeader("retry-after", Integer.toString(e.retryAfterSeconds()));
        }
        res.end(ResponseBodies.error(json, e).toString());
    }

    private String write(Object node) {
        try {
            return json.writeValueAsString(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs a stream's callbacks on the request's event-loop context. */
    private static Multi<Delta> onContext(Multi<Delta> m, Context ctx) {
        return m.emitOn(cmd -> ctx.runOnContext(v -> cmd.run()));
    }

    /** A non-streaming exchange: collect the deltas, answer once. */
    private final class JsonExchange {
        private final RoutingContext rc;
        private final Context ctx;
        private final GenerationService.Prepared p;
        private final StringBuilder text = new StringBuilder();
        private final List<Integer> ids = new ArrayList<>();
        private final List<Delta.Logprob> logprobs = new ArrayList<>();

        JsonExchange(RoutingContext rc, Context ctx, GenerationService.Prepared p) {
            this.rc = rc;
            this.ctx = ctx;
            this.p = p;
        }

        void start() {
            Cancellable c = onContext(service.run(p), ctx).subscribe().with(this::onDelta,
                    failure -> sendError(rc, GenerationService.translate(failure)));
            rc.response().closeHandler(v -> c.cancel());
        }

        private void onDelta(Delta d) {
            text.append(d.text());
            for (int t : d.tokenIds()) {
                ids.add(t);
            }
            if (d.logprobs() != null) {
                logprobs.addAll(d.logprobs());
            }
            if (!d.last()) {
                return;
            }
            if (d.error() != null) {
                sendError(rc, new ApiException(500, "server_error", null, null, d.error(), 0));
                return;
            }
            int[] tokenIds = ids.stream().mapToInt(Integer::intValue).toArray();
            var body = new ResponseBodies(json, p).whole(text.toString(), tokenIds,
                    p.request().logprobs() >= 0 ? logprobs : null, d);
            HttpServerResponse res = rc.response();
            if (!res.closed() && !res.ended()) {
                res.setStatusCode(200).putHeader("content-type", "application/json").end(write(body));
            }
        }
    }

    /** A streaming exchange: headers at admission, one SSE event per delta, then {@code [DONE]}. */
    private final class SseExchange {
        private final RoutingContext rc;
        private final Context ctx;
        private final GenerationService.Prepared p;
        private final ResponseBodies bodies;
        private boolean started;
        private int completionTokens;

        SseExchange(RoutingContext rc, Context ctx, GenerationService.Prepared p) {
            this.rc = rc;
            this.ctx = ctx;
            this.p = p;
            this.bodies = new ResponseBodies(json, p);
        }

        void start() {
            Cancellable c = onContext(service.run(p), ctx).subscribe().with(this::onDelta, this::onFailure);
            rc.response().closeHandler(v -> c.cancel());
        }

        private void onDelta(Delta d) {
            HttpServerResponse res = rc.response();
            if (res.closed() || res.ended()) {
                return;
            }
            if (d.admitted()) {
                started = true;
                res.setStatusCode(200).setChunked(true)
                        .putHeader("content-type", "text/event-stream; charset=utf-8")
                        .putHeader("cache-control", "no-cache")
                        .putHeader("x-accel-buffering", "no");
                event(bodies.first());
                return;
            }
            completionTokens += d.tokenIds().length;
            if (d.last() && d.error() != null) {
                event(ResponseBodies.error(json, new ApiException(500, "server_error", null, null, d.error(), 0)));
                res.end("data: [DONE]\n\n");
                return;
            }
            if (!d.last() && d.text().isEmpty() && d.tokenIds().length == 0) {
                return;
            }
            event(bodies.chunk(d));
            if (d.last()) {
                if (p.api().includeUsage()) {
                    event(bodies.usageChunk(completionTokens, d.stats()));
                }
                res.end("data: [DONE]\n\n");
            }
        }

        private void onFailure(Throwable failure) {
            ApiException e = GenerationService.translate(failure);
            if (!started) {
                sendError(rc, e);
                return;
            }
            HttpServerResponse res = rc.response();
            if (!res.closed() && !res.ended()) {
                event(ResponseBodies.error(json, e));
                res.end("data: [DONE]\n\n");
            }
        }

        private void event(Object node) {
            rc.response().write("data: " + write(node) + "\n\n");
        }
    }
}
