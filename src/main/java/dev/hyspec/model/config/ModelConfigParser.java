package dev.hyspec.model.config;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.checkpoint.CheckpointException;
import dev.hyspec.model.config.ModelConfig.Activation;
import dev.hyspec.model.config.ModelConfig.AttentionSpec;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.model.config.ModelConfig.GdnSpec;
import dev.hyspec.model.config.ModelConfig.Mamba2Spec;
import dev.hyspec.model.config.ModelConfig.MlpSpec;
import dev.hyspec.model.config.ModelConfig.MoeSpec;
import java.util.ArrayList;
import java.util.List;

/** Reads a Hugging Face {@code config.json} into a {@link ModelConfig}. */
public final class ModelConfigParser {
    private static final String FILE = "config.json";

    private ModelConfigParser() {}

    public static ModelConfig parse(JsonNode root) {
        ConfigReader top = new ConfigReader(root, FILE);
        if (!top.has("architectures")) {
            throw new CheckpointException("malformed config.json: key \"architectures\" is missing (supported: "
                    + Architecture.supportedNames() + ")");
        }
        List<String> names = top.strings("architectures");
        Architecture arch = names.stream().map(Architecture::fromHfName).flatMap(java.util.Optional::stream)
                .findFirst().orElseThrow(() -> new CheckpointException("unknown architecture " + names
                        + " in config.json; supported: " + Architecture.supportedNames()));
        // Multimodal Qwen checkpoints nest the language model's keys under text_config.
        ConfigReader c = top.has("text_config") ? new ConfigReader(top.node("text_config"), FILE + " text_config") : top;
        return switch (arch) {
            case MAMBA2 -> mamba2(c);
            case NEMOTRON_H -> nemotronH(c);
            case QWEN3_NEXT, QWEN3_5 -> qwen(arch, c, top);
        };
    }

    private static ModelConfig mamba2(ConfigReader c) {
        int hidden = c.integer("hidden_size");
        int heads = c.integer("num_heads");
        int headDim = c.integer("head_dim");
        int groups = c.integer("n_groups", 1);
        requireDivides(c, "num_heads", heads, "n_groups", groups);
        double[] limit = timeStepLimit(c);
        // HF Mamba2 normalises the gated output over all H·P channels.
        Mamba2Spec spec = new Mamba2Spec(heads, headDim, c.integer("state_size"), groups, c.integer("conv_kernel"),
                c.bool("use_conv_bias", true), c.bool("use_bias", false), heads * headDim,
                (float) limit[0], (float) limit[1]);
        int layers = c.integer("num_hidden_layers");
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < layers; i++) {
            String p = "backbone.layers." + i + ".";
            blocks.add(new Block(i, i, BlockKind.MAMBA2, p + "norm.weight", p + "mixer."));
        }
        return new ModelConfig(Architecture.MAMBA2, c.integer("vocab_size"), hidden,
                (float) c.number("layer_norm_epsilon", 1e-5), false, c.bool("tie_word_embeddings", true),
                "backbone.embeddings.weight", "backbone.norm_f.weight", blocks, spec, null, null, null, null,
                Integer.MAX_VALUE, c.tokenIds("eos_token_id"), c.tokenId("bos_token_id").orElse(null));
    }

    private static ModelConfig nemotronH(ConfigReader c) {
        int hidden = c.integer("hidden_size");
        List<BlockKind> pattern = nemotronPattern(c);
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < pattern.size(); i++) {
            String p = "backbone.layers." + i + ".";
            blocks.add(new Block(i, i, pattern.get(i), p + "norm.weight", p + "mixer."));
        }
        Mamba2Spec mamba = null;
        if (pattern.contains(BlockKind.MAMBA2)) {
            int heads = c.integer("mamba_num_heads");
            int headDim = c.integer("mamba_head_dim");
            int groups = c.integer("n_groups");
            requireDivides(c, "mamba_num_heads", heads, "n_groups", groups);
            // Nemotron-H's reference path clamps dt from below at time_step_min (torch_forward).
            double[] limit = timeStepLimit(c);
            double dtMin = Math.max(limit[0], c.number("time_step_min", 0.0));
            mamba = new Mamba2Spec(heads, headDim, c.integer("ssm_state_size"), groups, c.integer("conv_kernel"),
                    c.bool("use_conv_bias", true), c.bool("mamba_proj_bias", c.bool("use_bias", false)),
                    heads * headDim / groups, (float) dtMin, (float) limit[1]);
        }
        AttentionSpec attn = null;
        if (pattern.contains(BlockKind.ATTENTION)) {
            int heads = c.integer("num_attention_heads");
            int headDim = c.integer("head_dim", hidden / heads);
            attn = new AttentionSpec(heads, c.integer("num_key_value_heads", heads), headDim, 0, 0f, false, false,
                    c.bool("attention_bias", false));
            requireDivides(c, "num_attention_heads", heads, "num_key_value_heads", attn.numKvHeads());
        }
        MlpSpec mlp = pattern.contains(BlockKind.MLP)
                ? new MlpSpec(c.integer("intermediate_size"), activation(c, "mlp_hidden_act", "relu2"),
                        c.bool("mlp_bias", false))
                : null;
        MoeSpec moe = null;
        if (pattern.contains(BlockKind.MOE)) {
            if (c.has("moe_latent_size")) {
                throw new CheckpointException("config.json: Nemotron-H MoE with \"moe_latent_size\" is not supported");
            }
            moe = new MoeSpec(c.integer("n_routed_experts"), c.integer("num_experts_per_tok"),
                    c.bool("norm_topk_prob", true), c.integer("moe_intermediate_size"),
                    c.integer("moe_shared_expert_intermediate_size"), activation(c, "mlp_hidden_act", "relu2"),
                    true, c.integer("n_group", 1), c.integer("topk_group", 1),
                    (float) c.number("routed_scaling_factor", 1.0));
        }
        return new ModelConfig(Architecture.NEMOTRON_H, c.integer("vocab_size"), hidden,
                (float) c.number("layer_norm_epsilon", 1e-5), false, c.bool("tie_word_embeddings", false),
                "backbone.embeddings.weight", "backbone.norm_f.weight", blocks, mamba, null, attn, mlp, moe,
                c.integer("max_position_embeddings", Integer.MAX_VALUE), c.tokenIds("eos_token_id"),
                c.tokenId("bos_token_id").orElse(null));
    }

    /** {@code layers_block_type} (transformers 5.x) or {@code hybrid_override_pattern} (M * - E). */
    private static List<BlockKind> nemotronPattern(ConfigReader c) {
        List<BlockKind> kinds = new ArrayList<>();
        if (c.has("layers_block_type")) {
            for (String s : c.strings("layers_block_type")) {
                kinds.add(switch (s) {
                    case "linear_attention", "mamba", "M" -> BlockKind.MAMBA2;
                    case "full_attention", "attention", "*" -> BlockKind.ATTENTION;
                    case "mlp", "-" -> BlockKind.MLP;
                    case "moe", "E" -> BlockKind.MOE;
                    default -> throw c.bad("layers_block_type",
                            "a list of linear_attention, full_attention, mlp, moe", c.node("layers_block_type"));
                });
            }
        } else if (c.has("hybrid_override_pattern")) {
            String pattern = c.string("hybrid_override_pattern", "");
            for (char ch : pattern.toCharArray()) {
                kinds.add(switch (ch) {
                    case 'M' -> BlockKind.MAMBA2;
                    case '*' -> BlockKind.ATTENTION;
                    case '-' -> BlockKind.MLP;
                    case 'E' -> BlockKind.MOE;
                    default -> throw c.bad("hybrid_override_pattern", "a string of M, *, - and E",
                            c.node("hybrid_override_pattern"));
                });
            }
        } else {
            throw new CheckpointException(
                    "malformed config.json: neither \"layers_block_type\" nor \"hybrid_override_pattern\" is present");
        }
        if (kinds.isEmpty()) {
            throw new CheckpointException("malformed config.json: the layer pattern is empty");
        }
        return kinds;
    }

    private static ModelConfig qwen(Architecture arch, ConfigReader c, ConfigReader top) {
        int hidden = c.integer("hidden_size");
        int layers = c.integer("num_hidden_layers");
        List<String> types = c.strings("layer_types");
        if (types.size() != layers) {
            throw c.bad("layer_types", "a list of num_hidden_layers (" + layers + ") entries", c.node("layer_types"));
        }
        List<Integer> mlpOnly = c.integers("mlp_only_layers");
        int numExperts = c.integer("num_experts", 0);
        int sparseStep = c.integer("decoder_sparse_step", 1);
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < layers; i++) {
            String p = "model.layers." + i + ".";
            BlockKind mixer = switch (types.get(i)) {
                case "linear_attention" -> BlockKind.GATED_DELTA_NET;
                case "full_attention" -> BlockKind.ATTENTION;
                default -> throw c.bad("layer_types", "a list of linear_attention and full_attention",
                        c.node("layer_types"));
            };
            blocks.add(new Block(blocks.size(), i, mixer, p + "input_layernorm.weight",
                    p + (mixer == BlockKind.ATTENTION ? "self_attn." : "linear_attn.")));
            boolean sparse = arch == Architecture.QWEN3_NEXT && numExperts > 0 && !mlpOnly.contains(i)
                    && (i + 1) % sparseStep == 0;
            blocks.add(new Block(blocks.size(), i, sparse ? BlockKind.MOE : BlockKind.MLP,
                    p + "post_attention_layernorm.weight", p + "mlp."));
        }
        GdnSpec gdn = null;
        if (types.contains("linear_attention")) {
            gdn = new GdnSpec(c.integer("linear_num_key_heads"), c.integer("linear_num_value_heads"),
                    c.integer("linear_key_head_dim"), c.integer("linear_value_head_dim"),
                    c.integer("linear_conv_kernel_dim"));
            requireDivides(c, "linear_num_value_heads", gdn.numValueHeads(), "linear_num_key_heads",
                    gdn.numKeyHeads());
        }
        AttentionSpec attn = null;
        if (types.contains("full_attention")) {
            int heads = c.integer("num_attention_heads");
            int headDim = c.integer("head_dim", hidden / heads);
            JsonNode rope = c.node("rope_parameters");
            ConfigReader r = rope != null && rope.isObject() ? new ConfigReader(rope, "config.json rope_parameters") : c;
            String ropeType = r.string("rope_type", "default");
            if (!ropeType.equals("default")) {
                throw new CheckpointException("config.json: rope_type \"" + ropeType
                        + "\" is not supported (supported: default)");
            }
            double partial = r.number("partial_rotary_factor", c.number("partial_rotary_factor", 1.0));
            double theta = r.number("rope_theta", c.number("rope_theta", 10000.0));
            attn = new AttentionSpec(heads, c.integer("num_key_value_heads", heads), headDim,
                    (int) (headDim * partial), (float) theta, true, true, c.bool("attention_bias", false));
            requireDivides(c, "num_attention_heads", heads, "num_key_value_heads", attn.numKvHeads());
        }
        Activation act = activation(c, "hidden_act", "silu");
        MlpSpec mlp = blocks.stream().anyMatch(b -> b.kind() == BlockKind.MLP)
                ? new MlpSpec(c.integer("intermediate_size"), act, false) : null;
        MoeSpec moe = blocks.stream().anyMatch(b -> b.kind() == BlockKind.MOE)
                ? new MoeSpec(numExperts, c.integer("num_experts_per_tok"), c.bool("norm_topk_prob", true),
                        c.integer("moe_intermediate_size"), c.integer("shared_expert_intermediate_size"), act,
                        false, 1, 1, 1f)
                : null;
        return new ModelConfig(arch, c.integer("vocab_size"), hidden, (float) c.number("rms_norm_eps", 1e-6), true,
                top.bool("tie_word_embeddings", c.bool("tie_word_embeddings", false)),
                "model.embed_tokens.weight", "model.norm.weight", blocks, null, gdn, attn, mlp, moe,
                c.integer("max_position_embeddings", Integer.MAX_VALUE), c.tokenIds("eos_token_id"),
                c.tokenId("bos_token_id").orElse(null));
    }

    private static double[] timeStepLimit(ConfigReader c) {
        JsonNode n = c.node("time_step_limit");
        if (n == null || n.isNull()) {
            return new double[] {0.0, Double.POSITIVE_INFINITY};
        }
        if (!n.isArray() || n.size() != 2) {
            throw c.bad("time_step_limit", "a pair [min, max]", n);
        }
        return new double[] {c.number(n.get(0), "time_step_limit"), c.number(n.get(1), "time_step_limit")};
    }

    private static Activation activation(ConfigReader c, String key, String fallback) {
        String s = c.string(key, fallback);
        return switch (s) {
            case "silu", "swish" -> Activation.SILU;
            case "relu2" -> Activation.RELU2;
            default -> throw c.bad(key, "one of silu, swish, relu2", c.node(key));
        };
    }

    private static void requireDivides(ConfigReader c, String key, int n, String byKey, int by) {
        if (by <= 0 || n % by != 0) {
            throw c.bad(key, "a multiple of " + byKey + " (" + by + ")", c.node(key));
        }
    }
}
