package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.state.StateStore;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.ModelConfig.MoeSpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Sparse mixture of experts with a shared expert. Routing is decided on the host from the router
 * logits {@code [T, E]}; each selected expert then runs on the rows routed to it.
 *
 * <ul>
 *   <li>Qwen3-Next ({@code Qwen3NextSparseMoeBlock}): {@code p = softmax(logits)}, top-k, weights
 *       renormalised when {@code norm_topk_prob}; output {@code Σ p_e·expert_e(x) + σ(g·x)·shared(x)}.
 *   <li>Nemotron-H ({@code NemotronHMoE}): {@code s = σ(logits)}; experts chosen on
 *       {@code s + e_score_correction_bias} within the best {@code topk_group} groups (a group scores
 *       the sum of its two best); weights {@code s_e} (renormalised) times {@code routed_scaling_factor};
 *       output {@code Σ w_e·expert_e(x) + shared(x)}.
 * </ul>
 */
public final class SparseMoe implements Mixer {
    private final Backend backend;
    private final MoeSpec spec;
    private final Tensor router;          // [E, D]
    private final float[] scoreBias;      // [E], Nemotron-H only
    private final List<Mlp> experts;
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
        if (spec.sigmoidRouter()) {
            Tensor bias = w.optionalVector(prefix + "gate.e_score_correction_bias", spec.numExperts());
            scoreBias = bias == null ? new float[spec.numExperts()] : backend.download(bias);
            shared = new Mlp(w, prefix + "shared_experts.", hidden, spec.sharedIntermediateSize(), spec.activation(),
                    false);
            sharedGate = null;
        } else {
            scoreBias = null;
            shared = new Mlp(w, prefix + "shared_expert.", hidden, spec.sharedIntermediateSize(), spec.activation(),
                    false);
            sharedGate = w.matrix(prefix + "shared_expert_gate.weight", 1, hidden);
        }
    }

    @Override
    public Tensor forward(Tensor x, ForwardBatch batch, StateStore store) {
        int tokens = x.rows();
        int numExperts = spec.numExperts();
        Tensor logitsT = backend.zeros(tokens, numExperts);
        backend.matmul(x, router, null, logitsT);
        float[] logits = backend.download(logitsT);
        backend.free(logitsT);

        // route: per expert, the rows sent to it and their weights
        List<List<Integer>> rows = new ArrayList<>();
        List<List<Float>> weights = new ArrayList<>();
        for (int e = 0; e < numExperts; e++) {
            rows.add(new ArrayList<>());
            weights.add(new ArrayList<>());
        }
        for (int t = 0; t < tokens; t++) {
            float[] row = Arrays.copyOfRange(logits, t * numExperts, (t + 1) * numExperts);
            int[] chosen = new int[spec.topK()];
            float[] wts = new float[spec.topK()];
            if (spec.sigmoidRouter()) {
                routeSigmoid(row, chosen, wts);
            } else {
                routeSoftmax(row, chosen, wts);
            }
            for (int i = 0; i < chosen.length; i++) {
                rows.get(chosen[i]).add(t);
                weights.get(chosen[i]).add(wts[i]);
            }
        }

        // routed experts, each on its own rows, summed back with their weights
        Tensor out = backend.zeros(tokens, x.cols());
        for (int e = 0; e < numExperts; e++) {
            if (rows.get(e).isEmpty()) {
                continue;
            }
            int[] idx = rows.get(e).stream().mapToInt(Integer::intValue).toArray();
            float[] scale = new float[idx.length];
            for (int i = 0; i < idx.length; i++) {
                scale[i] = weights.get(e).get(i);
            }
            Tensor xe = backend.zeros(idx.length, x.cols());
            backend.gatherRows(x, idx, xe);
            Tensor ye = experts.get(e).forward(xe, batch, store);
            backend.scatterAddRows(ye, idx, scale, out);
            backend.free(xe);
            backend.free(ye);
        }

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

    /** Qwen3-Next: softmax, top-k, optional renormalisation. */
    private void routeSoftmax(float[] logits, int[] chosen, float[] wts) {
        float max = Float.NEGATIVE_INFINITY;
        for (float l : logits) {
            max = Math.max(max, l);
        }
        float sum = 0f;
        float[] p = new float[logits.length];
        for (int e = 0; e < p.length; e++) {
            p[e] = (float) Math.exp(logits[e] - max);
            sum += p[e];
        }
        for (int e = 0; e < p.length; e++) {
            p[e] /= sum;
        }
        topK(p, chosen);
        float total = 0f;
        for (int i = 0; i < chosen.length; i++) {
            wts[i] = p[chosen[i]];
            total += wts[i];
        }
        if (spec.normTopkProb()) {
            for (int i = 0; i < wts.length; i++) {
                wts[i] /= total;
            }
        }
    }

    /** Nemotron-H: sigmoid scores, biased group-limited choice, unbiased weights. */
    private void routeSigmoid(float[] logits, int[] chosen, float[] wts) {
        int n = logits.length;
        float[] s = new float[n];
        float[] choice = new float[n];
        for (int e = 0; e < n; e++) {
            s[e] = 1f / (1f + (float) Math.exp(-logits[e]));
            choice[e] = s[e] + scoreBias[e];
        }
        int groups = spec.nGroup();
        int perGroup = n / groups;
        if (groups > 1) {
            float[] groupScore = new float[groups];
            for (int g = 0; g < groups; g++) {
                float[] members = Arrays.copyOfRange(choice, g * perGroup, (g + 1) * perGroup);
                int[] best = new int[Math.min(2, perGroup)];
                topK(members, best);
                for (int b : best) {
                    groupScore[g] += members[b];
                }
            }
            int[] keep = new int[spec.topkGroup()];
            topK(groupScore, keep);
            boolean[] kept = new boolean[groups];
            for (int g : keep) {
                kept[g] = true;
            }
            for (int e = 0; e < n; e++) {
                if (!kept[e / perGroup]) {
                    choice[e] = Float.NEGATIVE_INFINITY;
                }
            }
        }
        topK(choice, chosen);
        float total = 0f;
        for (int i = 0; i < chosen.length; i++) {
            wts[i] = s[chosen[i]];
            total += wts[i];
        }
        for (int i = 0; i < wts.length; i++) {
            if (spec.normTopkProb()) {
                wts[i] /= total + 1e-20f;
            }
            wts[i] *= spec.routedScalingFactor();
        }
    }

    /** Indices of the {@code out.length} largest values, largest first (ties: lower index first). */
    private static void topK(float[] values, int[] out) {
        boolean[] taken = new boolean[values.length];
        for (int i = 0; i < out.length; i++) {
            int best = -1;
            for (int e = 0; e < values.length; e++) {
                if (!taken[e] && (best < 0 || values[e] > values[best])) {
                    best = e;
                }
            }
            taken[best] = true;
            out[i] = best;
        }
    }
}
