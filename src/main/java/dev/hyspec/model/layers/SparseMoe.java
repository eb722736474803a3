package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.ExpertWeights;
import dev.hyspec.backend.MoeRouting;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.ModelConfig.Activation;
import dev.hyspec.model.config.ModelConfig.MoeSpec;
import dev.hyspec.state.StateStore;
import java.util.ArrayList;
import java.util.List;

/**
 * Sparse mixture of experts with a shared expert; the routing rule is {@link MoeRouting}'s.
 *
 * <ul>
 *   <li>Qwen3-Next ({@code Qwen3NextSparseMoeBlock}): output {@code Σ p_e·expert_e(x) + σ(g·x)·shared(x)}.
 *   <li>Nemotron-H ({@code NemotronHMoE}): output {@code Σ w_e·expert_e(x) + shared(x)}.
 * </ul>
 *
 * Two ways to the same numbers. Prefill chunks route on the host and run each selected expert as
 * an ordinary MLP on the rows sent to it (large products, tensor cores on a GPU). Decode and verify
 * steps (a uniform batch, {@link ForwardBatch#tokensPerRow()} {@code > 0}) keep everything on the
 * backend — {@link Backend#moeRoute}, {@link Backend#moeExpertMatmul} over the {@code T·K} routed
 * pairs, {@link Backend#moeCombine} — so the step needs no download and runs as a captured graph.
 */
public final class SparseMoe implements Mixer {
    private final Backend backend;
    private final MoeSpec spec;
    private final MoeRouting routing;
    private final Tensor router;          // [E, D]
    private final float[] scoreBias;      // [E], host copy of routing.scoreBias(); null without one
    private final List<Mlp> experts;
    private final ExpertWeights gateProjs; // E × [I, D], SwiGLU only
    private final ExpertWeights upProjs;   // E × [I, D]
    private final ExpertWeights downProjs; // E × [D, I]
    private final Mlp shared;
    private final Tensor sharedGate;      // [1, D], Qwen3-Next only

    public SparseMoe(Weights w, String prefix, MoeSpec spec, int hidden) {
        this.backend = w.backend();
        this.spec = spec;
        router = w.matrix(prefix + "gate.weight", spec.numExperts(), hidden);
        experts = new ArrayList<>();
        for (int e = 0; e < spec.numExperts(); e++) {
            experts.add(new Mlp(w, prefix + "experts." + e + ".", hidden, spec.expertIntermediateSize(),
                    spec.activation(), false));
        }
        gateProjs = spec.activation() == Activation.SILU
                ? backend.expertWeights(experts.stream().map(Mlp::gateProj).toArray(Tensor[]::new)) : null;
        upProjs = backend.expertWeights(experts.stream().map(Mlp::upProj).toArray(Tensor[]::new));
        downProjs = backend.expertWeights(experts.stream().map(Mlp::downProj).toArray(Tensor[]::new));
        if (spec.sigmoidRouter()) {
            Tensor bias = w.optionalVector(prefix + "gate.e_score_correction_bias", spec.numExperts());
            scoreBias = bias == null ? null : backend.download(bias);
            routing = new MoeRouting(true, spec.topK(), spec.normTopkProb(), spec.nGroup(), spec.topkGroup(),
                    spec.routedScalingFactor(), bias);
            shared = new Mlp(w, prefix + "shared_experts.", hidden, spec.sharedIntermediateSize(), spec.activation(),
                    false);
            sharedGate = null;
        } else {
            scoreBias = null;
            routing = MoeRouting.softmax(spec.topK(), spec.normTopkProb());
            shared = new Mlp(w, prefix + "shared_expert.", hidden, spec.sharedIntermediateSize(), spec.activation(),
                    false);
            sharedGate = w.matrix(prefix + "shared_expert_gate.weight", 1, hidden);
        }
    }

    @Override
    public Tensor forward(Tensor x, ForwardBatch batch, StateStore store) {
        int tokens = x.rows();
        // router logits [T, E]
        Tensor logits = backend.zeros(tokens, spec.numExperts());
        backend.matmul(x, router, null, logits);
        Tensor out = batch.tokensPerRow() > 0 ? routedOnBackend(x, logits) : routedOnHost(x, logits, batch, store);
        backend.free(logits);

        // shared expert
        Tensor s = shared.forward(x, batch, store);
        if (sharedGate != null) {
            Tensor g = backend.zeros(tokens, 1);
            backend.matmul(x, sharedGate, null, g);
            backend.sigmoidGate(s, g, s);
            backend.free(g);
        }
        backend.add(out, s, out);
        backend.free(s);
        return out;
    }

    /** Routed experts of a decode/verify step, without leaving the backend. Returns {@code [T, D]}. */
    private Tensor routedOnBackend(Tensor x, Tensor logits) {
        int tokens = x.rows();
        int pairs = tokens * spec.topK();
        int inter = spec.expertIntermediateSize();
        Tensor ids = backend.zeros(tokens, spec.topK());       // [T, K], expert ids as floats
        Tensor weights = backend.zeros(tokens, spec.topK());   // [T, K]
        backend.moeRoute(logits, routing, ids, weights);
        Tensor h = backend.zeros(pairs, inter);                 // [T·K, I]
        backend.moeExpertMatmul(x, ids, upProjs, h);
        if (gateProjs != null) {
            Tensor g = backend.zeros(pairs, inter);             // [T·K, I]
            backend.moeExpertMatmul(x, ids, gateProjs, g);
            backend.siluMul(g, h, h);
            backend.free(g);
        } else {
            backend.relu2(h, h);
        }
        Tensor y = backend.zeros(pairs, x.cols());              // [T·K, D]
        backend.moeExpertMatmul(h, ids, downProjs, y);
        Tensor out = backend.zeros(tokens, x.cols());           // [T, D]
        backend.moeCombine(y, ids, weights, out);
        for (Tensor t : new Tensor[] {ids, weights, h, y}) {
            backend.free(t);
        }
        return out;
    }

    /** Routed experts of a prefill chunk: routing on the host, each expert on its own rows. Returns {@code [T, D]}. */
    private Tensor routedOnHost(Tensor x, Tensor logits, ForwardBatch batch, StateStore store) {
        int tokens = x.rows();
        int k = spec.topK();
        int[] ids = new int[tokens * k];
        float[] weights = new float[tokens * k];
        routing.route(backend.download(logits), spec.numExperts(), scoreBias, ids, weights);

        // per expert, the rows sent to it and their weights, summed back in ascending expert order
        Tensor out = backend.zeros(tokens, x.cols());
        for (int e = 0; e < spec.numExperts(); e++) {
            int expert = e;
            int[] pairs = java.util.stream.IntStream.range(0, ids.length).filter(i -> ids[i] == expert).toArray();
            if (pairs.length == 0) {
                continue;
            }
            int[] rows = new int[pairs.length];
            float[] scale = new float[pairs.length];
            for (int i = 0; i < pairs.length; i++) {
                rows[i] = pairs[i] / k;
                scale[i] = weights[pairs[i]];
            }
            Tensor xe = backend.zeros(rows.length, x.cols());
            backend.gatherRows(x, rows, xe);
            Tensor ye = experts.get(e).forward(xe, batch, store);
            backend.scatterAddRows(ye, rows, scale, out);
            backend.free(xe);
            backend.free(ye);
        }
        return out;
    }
}
