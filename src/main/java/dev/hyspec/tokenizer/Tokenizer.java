package dev.hyspec.tokenizer;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.huggingface.tokenizers.jni.LibUtils;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * A checkpoint's Hugging Face tokenizer ({@code tokenizer.json}), run by the Rust {@code tokenizers}
 * library through DJL, strictly offline: nothing is ever downloaded.
 *
 * <p>Encoding and decoding are safe to call from several threads at once; {@link #close()} must not
 * race with them.
 */
public final class Tokenizer implements AutoCloseable {
    static final String FILE_NAME = "tokenizer.json";

    static {
        // Offline, DJL takes the native library bundled in its jar instead of downloading a GPU
        // build, and skips its usage ping; it must be set before DJL's classes initialise.
        System.setProperty("ai.djl.offline", "true");
    }

    private final HuggingFaceTokenizer tokenizer;
    private final Map<String, Integer> vocabulary;
    private final int vocabularySize;
    private final OptionalInt bosTokenId;
    private final OptionalInt eosTokenId;

    private Tokenizer(
            HuggingFaceTokenizer tokenizer,
            Map<String, Integer> vocabulary,
            OptionalInt bosTokenId,
            OptionalInt eosTokenId) {
        this.tokenizer = tokenizer;
        this.vocabulary = vocabulary;
        this.vocabularySize = vocabulary.values().stream().mapToInt(Integer::intValue).max().orElse(-1) + 1;
        this.bosTokenId = bosTokenId;
        this.eosTokenId = eosTokenId;
    }

    /**
     * Loads {@code tokenizer.json} from {@code checkpointDir}, and the BOS and EOS tokens named by
     * {@code tokenizer_config.json} when that file is there.
     *
     * @return empty when the folder has no {@code tokenizer.json}: such a checkpoint is served on token
     *     ids alone
     * @throws TokenizerException naming the file when {@code tokenizer.json} or
     *     {@code tokenizer_config.json} is malformed, or when a BOS or EOS token it names is not in the
     *     vocabulary
     */
    public static Optional<Tokenizer> load(Path checkpointDir) {
        Path file = checkpointDir.resolve(FILE_NAME);
        if (!Files.isRegularFile(file)) {
            return Optional.empty();
        }
        String json = JsonFiles.readText(file);
        Map<String, Integer> vocabulary = vocabulary(file, JsonFiles.parseObject(file, json));
        Optional<TokenizerConfig> config = TokenizerConfig.read(checkpointDir);
        OptionalInt bos = specialTokenId(config, "bos_token", config.flatMap(TokenizerConfig::bosToken), vocabulary, file);
        OptionalInt eos = specialTokenId(config, "eos_token", config.flatMap(TokenizerConfig::eosToken), vocabulary, file);
        return Optional.of(new Tokenizer(open(file, json), vocabulary, bos, eos));
    }

    /**
     * The ids of {@code text}, without the special tokens that the tokenizer's post-processor would
     * add around a sequence (such as a leading BOS): the same as Hugging Face's
     * {@code tokenizer.encode(text, add_special_tokens=False)}. Chat templates already write those
     * tokens as text, and special tokens written as text in {@code text} (e.g. {@code <|im_start|>})
     * still become their single ids. No truncation or padding is applied.
     */
    public int[] encode(String text) {
        long[] ids = tokenizer.encode(text, false, false).getIds();
        int[] result = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            result[i] = Math.toIntExact(ids[i]);
        }
        return result;
    }

    /**
     * The text of {@code ids}, keeping special tokens: Hugging Face's default {@code decode(ids)}.
     * Ids the vocabulary does not have decode to nothing.
     */
    public String decode(int[] ids) {
        return decode(ids, false);
    }

    /**
     * The text of {@code ids}; with {@code skipSpecialTokens}, special tokens (such as EOS or
     * {@code <|im_end|>}) are left out, as Hugging Face's {@code decode(ids, skip_special_tokens=True)}.
     * Ids the vocabulary does not have decode to nothing.
     */
    public String decode(int[] ids, boolean skipSpecialTokens) {
        return decode(ids, 0, ids.length, skipSpecialTokens);
    }

    String decode(int[] ids, int from, int to, boolean skipSpecialTokens) {
        long[] wide = new long[to - from];
        for (int i = from; i < to; i++) {
            wide[i - from] = ids[i];
        }
        return tokenizer.decode(wide, skipSpecialTokens);
    }

    /** The id of the BOS token named by {@code tokenizer_config.json}, if it names one. */
    public OptionalInt bosTokenId() {
        return bosTokenId;
    }

    /** The id of the EOS token named by {@code tokenizer_config.json}, if it names one. */
    public OptionalInt eosTokenId() {
        return eosTokenId;
    }

    /**
     * The id of the vocabulary entry or added token spelled exactly {@code token} (in the
     * tokenizer's internal spelling, e.g. {@code Ġworld} for a byte-level BPE), if there is one.
     */
    public OptionalInt tokenId(String token) {
        Integer id = vocabulary.get(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    /** One more than the highest id of the vocabulary and added tokens. */
    public int vocabularySize() {
        return vocabularySize;
    }

    /** Frees the native tokenizer; the object must not be used afterwards. */
    @Override
    public void close() {
        tokenizer.close();
    }

    private static HuggingFaceTokenizer open(Path file, String json) {
        // Outside the try below: failing to load the native library is no fault of the file.
        LibUtils.checkStatus();
        Map<String, String> options = Map.of(
                "addSpecialTokens", "false",
                // A tokenizer.json may carry truncation or padding settings meant for training;
                // a server must see every prompt token and pad nothing.
                "truncation", "false",
                "padding", "false");
        try {
            return HuggingFaceTokenizer.newInstance(
                    new ByteArrayInputStream(json.getBytes(StandardCharsets.UTF_8)), options);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (RuntimeException e) {
            throw new TokenizerException(
                    file + ": rejected by the Hugging Face tokenizers library: " + e.getMessage(), e);
        }
    }

    // The native library offers no token-to-id lookup, so the vocabulary is read from the JSON here.
    private static Map<String, Integer> vocabulary(Path file, JsonNode root) {
        JsonNode model = root.get("model");
        if (model == null || !model.isObject()) {
            throw new TokenizerException(file + ": has no \"model\" object");
        }
        JsonNode vocab = model.get("vocab");
        Map<String, Integer> result = new HashMap<>();
        if (vocab == null || vocab.isNull()) {
            throw new TokenizerException(file + ": \"model\" has no \"vocab\"");
        } else if (vocab.isObject()) {
            for (Map.Entry<String, JsonNode> entry : vocab.properties()) {
                if (!entry.getValue().canConvertToInt() || !entry.getValue().isIntegralNumber()) {
                    throw new TokenizerException(file + ": \"model.vocab\" maps \"" + entry.getKey()
                            + "\" to " + JsonFiles.describe(entry.getValue()) + ", expected an integer id");
                }
                result.put(entry.getKey(), entry.getValue().intValue());
            }
        } else if (vocab.isArray()) {
            // Unigram models list [piece, score] pairs; the id is the position.
            for (int id = 0; id < vocab.size(); id++) {
                JsonNode piece = vocab.get(id);
                if (!piece.isArray() || piece.isEmpty() || !piece.get(0).isTextual()) {
                    throw new TokenizerException(file + ": entry " + id
                            + " of \"model.vocab\" is not a [piece, score] pair");
                }
                result.putIfAbsent(piece.get(0).textValue(), id);
            }
        } else {
            throw new TokenizerException(file + ": \"model.vocab\" must be an object or an array, found "
                    + JsonFiles.describe(vocab));
        }
        JsonNode added = root.get("added_tokens");
        if (added != null && !added.isNull()) {
            if (!added.isArray()) {
                throw new TokenizerException(file + ": \"added_tokens\" must be an array, found "
                        + JsonFiles.describe(added));
            }
            for (JsonNode token : added) {
                JsonNode id = token.get("id");
                JsonNode content = token.get("content");
                if (id == null || !id.isIntegralNumber() || !id.canConvertToInt()
                        || content == null || !content.isTextual()) {
                    throw new TokenizerException(file + ": every entry of \"added_tokens\" needs an integer"
                            + " \"id\" and a string \"content\"");
                }
                result.put(content.textValue(), id.intValue());
            }
        }
        return result;
    }

    private static OptionalInt specialTokenId(
            Optional<TokenizerConfig> config,
            String field,
            Optional<String> token,
            Map<String, Integer> vocabulary,
            Path tokenizerFile) {
        if (token.isEmpty()) {
            return OptionalInt.empty();
        }
        Integer id = vocabulary.get(token.get());
        if (id == null) {
            throw new TokenizerException(config.orElseThrow().file() + ": \"" + field + "\" is \"" + token.get()
                    + "\", which is not a token of " + tokenizerFile);
        }
        return OptionalInt.of(id);
    }
}
