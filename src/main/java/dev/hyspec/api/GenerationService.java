package dev.hyspec.api;

import dev.hyspec.config.HyspecConfig;
import dev.hyspec.engine.Engine;
import dev.hyspec.engine.EngineUnavailableException;
import dev.hyspec.engine.FinishReason;
import dev.hyspec.engine.GenerationRequest;
import dev.hyspec.engine.InvalidRequestException;
import dev.hyspec.engine.LoadedModel;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.engine.TokenEvent;
import dev.hyspec.metrics.RequestMetrics;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.sampling.TokenLogprob;
import dev.hyspec.tokenizer.IncrementalDecoder;
import dev.hyspec.tokenizer.Tokenizer;
import io.smallrye.mutiny.Multi;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * Turns API requests into engine requests and engine token events into text deltas: model check,
 * prompt tokenization and chat template, sampling parameters, incremental detokenization, stop
 * strings and logprobs. Knows nothing of HTTP; errors are {@link ApiException}s.
 */
@ApplicationScoped
public class GenerationService {
    private final ModelRegistry registry;
    private final Engine engine;
    private final HyspecConfig config;
    private final RequestMetrics metrics;

    public GenerationService(ModelRegistry registry, Engine engine, HyspecConfig config, RequestMetrics metrics) {
        this.registry = registry;
        this.engine = engine;
        this.config = config;
        this.metrics = metrics;
    }

    /** Counts a request refused before it reached the engine (bad input, no model). */
    public void refused(ApiException e) {
        metrics.rejected(e.status() == 503 ? "overloaded" : "rejected");
    }

    /** A request ready to run: its id, the model, the prompt ids and the engine request. */
    public record Prepared(String id, LoadedModel model, int[] promptIds, GenerationRequest request, ApiRequest api,
                           long arrivalNanos) {}

    /** The served model (503 while none is loaded). */
    public LoadedModel model() {
        return registry.model().orElseThrow(() -> ApiException.unavailable("no_model",
                "no model is loaded (set hyspec.model.path)", 5));
    }

    /** The drafts per step a request gets when it asks for n-gram speculation without a count. */
    public int defaultSpecTokens() {
        return config.spec().numTokens();
    }

    /** Checks the model, builds the prompt and the sampling parameters. */
    public Prepared prepare(ApiRequest r) {
        long arrival = System.nanoTime();
        LoadedModel m = model();
        if (r.model() != null && !r.model().equals(m.id())) {
            throw ApiException.badRequest("model", "model_not_found", "the model '" + r.model()
                    + "' does not exist; this server serves '" + m.id() + "' (GET /v1/models)");
        }
        int[] prompt = promptIds(r, m);
        String promptParam = r.chat() ? "messages" : "prompt";
        int vocab = m.model().config().vocabSize();
        for (int t : prompt) {
            if (t >= vocab) {
                throw ApiException.badRequest(promptParam, "token id " + t + " is outside the vocabulary [0, " + vocab + ")");
            }
        }
        int context = engine.maxSequenceLength();
        if (prompt.length >= context) {
            throw ApiException.badRequest(promptParam, "the prompt has " + prompt.length
                    + " tokens, but this model's context is " + context + " tokens (prompt and output together)");
        }
        if (!r.stop().isEmpty() && m.tokenizer().isEmpty()) {
            throw ApiException.badRequest("stop", "stop strings need a tokenizer, and this checkpoint has none; "
                    + "use stop_token_ids");
        }
        int maxTokens = r.maxTokens() != null ? r.maxTokens()
                : r.chat() ? context - prompt.length : Math.min(SamplingParams.DEFAULT_MAX_TOKENS, context - prompt.length);
        SamplingParams sampling = new SamplingParams(r.temperature(), r.topP(), r.topK(), r.seed(), maxTokens,
                r.stopTokenIds(), r.ignoreEos());
        String id = (r.chat() ? "chatcmpl-" : "cmpl-") + UUID.randomUUID().toString().replace("-", "");
        GenerationRequest g = new GenerationRequest(id, prompt, sampling, r.numDrafts(), null, r.strategy(),
                r.logprobs());
        return new Prepared(id, m, prompt, g, r, arrival);
    }

    private static int[] promptIds(ApiRequest r, LoadedModel m) {
        if (r.promptIds() != null) {
            return r.promptIds();
        }
        Tokenizer tok = m.tokenizer().orElseThrow(() -> ApiException.badRequest(r.chat() ? "messages" : "prompt",
                "this checkpoint has no tokenizer: send the prompt as an array of token ids"));
        if (!r.chat()) {
            int[] ids = tok.encode(r.promptText());
            if (ids.length == 0) {
                throw ApiException.badRequest("prompt", "the prompt encodes to no tokens");
            }
            return ids;
        }
        var template = m.chatTemplate().orElseThrow(() -> ApiException.badRequest("messages",
                "this checkpoint has no chat template; use /v1/completions"));
        String text;
        try {
            text = template.render(r.messages(), true);
        } catch (RuntimeException e) {
            throw ApiException.badRequest("messages", "the chat template refused these messages: " + e.getMessage());
        }
        int[] ids = tok.encode(text);
        if (ids.length == 0) {
            throw ApiException.badRequest("messages", "the messages render to an empty prompt");
        }
        return ids;
    }

    /**
     * Runs a prepared request. The stream starts with the admission delta (or fails with an
     * {@link ApiException} before it: bad input the engine found, or overload); cancelling it
     * aborts the request.
     */
    public Multi<Delta> run(Prepared p) {
        Detokenizer detok = new Detokenizer(p.model().tokenizer().orElse(null), p);
        RequestClock clock = new RequestClock(p);
        return engine.generate(p.request())
                .onItem().transform(ev -> {
                    boolean matchedBefore = detok.stopped();
                    Delta d = detok.next(ev);
                    if (!matchedBefore && detok.stopped() && !ev.last()) {
                        // a stop string ended the text: the engine stops the request and reports its stats
                        engine.abort(p.id());
                    }
                    if (d != null) {
                        clock.record(d);
                    }
                    return d;
                })
                .select().where(d -> d != null)
                .onCancellation().invoke(clock::cancelled)
                .onFailure().transform(failure -> {
                    ApiException e = translate(failure);
                    metrics.rejected(e.status() == 503 ? "overloaded" : "rejected");
                    return e;
                });
    }

    /** The request-level meters of one request: time to first token, inter-token latency, end to end. */
    private final class RequestClock {
        private final Prepared p;
        private String strategy = "none";
        private long lastTokenNanos;
        private int generated;
        private boolean finished;

        RequestClock(Prepared p) {
            this.p = p;
        }

        void record(Delta d) {
            long now = System.nanoTime();
            if (d.admitted()) {
                strategy = d.stats().strategy();
                return;
            }
            if (d.tokenIds().length > 0) {
                if (generated == 0) {
                    metrics.firstToken(strategy, now - p.arrivalNanos());
                } else {
                    metrics.interToken(strategy, now - lastTokenNanos);
                }
                lastTokenNanos = now;
                generated += d.tokenIds().length;
            }
            if (d.last()) {
                finished = true;
                metrics.finished(strategy, d.finishReason(), p.promptIds().length, generated, now - p.arrivalNanos());
            }
        }

        void cancelled() {
            if (!finished) {
                finished = true;
                metrics.finished(strategy, FinishReason.ABORT.wireName(), p.promptIds().length, generated,
                        System.nanoTime() - p.arrivalNanos());
            }
        }
    }

    static ApiException translate(Throwable t) {
        if (t instanceof InvalidRequestException e) {
            String param = "num_speculative_tokens".equals(e.param()) ? "speculative.num_tokens" : e.param();
            return ApiException.badRequest(param, e.getMessage());
        }
        if (t instanceof EngineUnavailableException e) {
            return ApiException.unavailable(e.code(), e.getMessage(), e.retryAfterSeconds());
        }
        if (t instanceof ApiException e) {
            return e;
        }
        return new ApiException(500, "server_error", null, null, "engine failure: " + t.getMessage(), 0);
    }

    /** Token events → deltas for one request: detokenization, stop strings, logprob text. */
    private static final class Detokenizer {
        private final Tokenizer tok;
        private final IncrementalDecoder decoder;
        private final StopStrings stops;
        private final boolean wantLogprobs;
        private final List<Integer> stopTokenIds;
        private int lastToken = -1;

        Detokenizer(Tokenizer tok, Prepared p) {
            this.tok = tok;
            this.decoder = tok == null ? null : new IncrementalDecoder(tok, p.promptIds(), true);
            this.stops = new StopStrings(p.api().stop());
            this.wantLogprobs = p.request().logprobs() >= 0;
            this.stopTokenIds = p.request().sampling().stopTokenIds();
        }

        /** The delta for one engine event, or null when it adds nothing the client sees. */
        Delta next(TokenEvent ev) {
            if (ev.admitted()) {
                return new Delta(true, "", new int[0], null, null, null, ev.stats(), null);
            }
            if (stops.matched() != null && !ev.last()) {
                return null;   // tokens after the stop string: the abort is on its way
            }
            boolean matchedBefore = stops.matched() != null;
            StringBuilder text = new StringBuilder();
            int[] tokens = matchedBefore ? new int[0] : ev.tokens();
            if (tokens.length > 0) {
                lastToken = tokens[tokens.length - 1];
            }
            for (int t : tokens) {
                if (decoder != null && stops.matched() == null) {
                    text.append(stops.add(decoder.add(t)));
                }
            }
            List<Delta.Logprob> logprobs = wantLogprobs && !matchedBefore ? logprobs(ev.logprobs()) : null;
            if (!ev.last()) {
                return new Delta(false, text.toString(), tokens, logprobs, null, null, null, null);
            }
            if (stops.matched() != null) {
                return new Delta(false, text.toString(), tokens, logprobs, FinishReason.STOP.wireName(),
                        stops.matched(), ev.stats(), null);
            }
            if (decoder != null) {
                text.append(stops.add(decoder.flush()));
                text.append(stops.flush());
            }
            FinishReason reason = ev.finishReason();
            return new Delta(false, text.toString(), tokens, logprobs, reason.wireName(),
                    reason == FinishReason.STOP ? stopTokenId() : null, ev.stats(), ev.error());
        }

        /** vLLM reports the stop token id as {@code stop_reason} unless it was EOS. */
        private Object stopTokenId() {
            return lastToken >= 0 && stopTokenIds.contains(lastToken) ? lastToken : null;
        }

        boolean stopped() {
            return stops.matched() != null;
        }

        private List<Delta.Logprob> logprobs(TokenLogprob[] lps) {
            List<Delta.Logprob> out = new ArrayList<>();
            if (lps == null) {
                return out;
            }
            for (TokenLogprob lp : lps) {
                List<Delta.Top> top = new ArrayList<>();
                for (int k = 0; k < lp.topIds().length; k++) {
                    top.add(new Delta.Top(tokenText(lp.topIds()[k]), lp.topLogprobs()[k]));
                }
                out.add(new Delta.Logprob(tokenText(lp.token()), lp.logprob(), top));
            }
            return out;
        }

        private String tokenText(int id) {
            return tok == null ? "token_id:" + id : tok.decode(new int[] {id});
        }
    }
}
