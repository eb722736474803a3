package dev.hyspec.tokenizer;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Small but real Hugging Face tokenizer files, written by hand for tests.
 *
 * <p>The byte-level BPE one follows GPT-2: ids 0-255 are the 256 bytes (id = byte value, spelled
 * with GPT-2's byte-to-unicode table), then the merges below, then special tokens.
 */
final class TestTokenizers {
    static final ObjectMapper JSON = new ObjectMapper();

    /** Merges in rank order, and the id each merged token gets. */
    static final String[] MERGES = {"h e", "l l", "ll o", "he llo", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"};
    static final int HE = 256;
    static final int LL = 257;
    static final int LLO = 258;
    static final int HELLO = 259;
    static final int SPACE_WORLD = 264;
    static final int BOS = 265;
    static final int EOS = 266;
    static final int IM_START = 267;
    static final int IM_END = 268;

    /** A ChatML template as Qwen-style checkpoints ship it. */
    static final String CHATML_TEMPLATE = "{% for message in messages %}"
            + "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
            + "{% endfor %}"
            + "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    private TestTokenizers() {}

    /** GPT-2's reversible map from bytes to printable characters. */
    static char[] byteToUnicode() {
        List<Integer> printable = new ArrayList<>();
        for (int b = '!'; b <= '~'; b++) {
            printable.add(b);
        }
        for (int b = 0xA1; b <= 0xAC; b++) {
            printable.add(b);
        }
        for (int b = 0xAE; b <= 0xFF; b++) {
            printable.add(b);
        }
        char[] map = new char[256];
        int next = 0;
        for (int b = 0; b < 256; b++) {
            map[b] = printable.contains(b) ? (char) b : (char) (256 + next++);
        }
        return map;
    }

    static ObjectNode byteLevelBpe() {
        ObjectNode root = JSON.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        addSpecial(added, BOS, "<s>");
        addSpecial(added, EOS, "</s>");
        addSpecial(added, IM_START, "<|im_start|>");
        addSpecial(added, IM_END, "<|im_end|>");
        root.putNull("normalizer");
        ObjectNode pre = root.putObject("pre_tokenizer");
        pre.put("type", "ByteLevel");
        pre.put("add_prefix_space", false);
        pre.put("trim_offsets", true);
        pre.put("use_regex", true);
        // Adds a BOS around every sequence, as Llama-style checkpoints do; Tokenizer.encode must not.
        ObjectNode post = root.putObject("post_processor");
        post.put("type", "TemplateProcessing");
        ArrayNode single = post.putArray("single");
        single.addObject().putObject("SpecialToken").put("id", "<s>").put("type_id", 0);
        single.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
        ArrayNode pair = post.putArray("pair");
        pair.addObject().putObject("SpecialToken").put("id", "<s>").put("type_id", 0);
        pair.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
        pair.addObject().putObject("Sequence").put("id", "B").put("type_id", 1);
        ObjectNode bos = post.putObject("special_tokens").putObject("<s>");
        bos.put("id", "<s>");
        bos.putArray("ids").add(BOS);
        bos.putArray("tokens").add("<s>");
        ObjectNode decoder = root.putObject("decoder");
        decoder.put("type", "ByteLevel");
        decoder.put("add_prefix_space", true);
        decoder.put("trim_offsets", true);
        decoder.put("use_regex", true);
        ObjectNode model = root.putObject("model");
        model.put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false);
        model.put("byte_fallback", false);
        model.put("ignore_merges", false);
        ObjectNode vocab = model.putObject("vocab");
        char[] bytes = byteToUnicode();
        for (int b = 0; b < 256; b++) {
            vocab.put(String.valueOf(bytes[b]), b);
        }
        ArrayNode merges = model.putArray("merges");
        int id = 256;
        for (String merge : MERGES) {
            vocab.put(merge.replace(" ", ""), id++);
            merges.add(merge);
        }
        return root;
    }

    /** A SentencePiece-style word tokenizer whose Metaspace decoder drops the first word's space. */
    static ObjectNode metaspaceWordLevel() {
        ObjectNode root = JSON.createObjectNode();
        root.put("version", "1.0");
        root.putArray("added_tokens");
        ObjectNode pre = root.putObject("pre_tokenizer");
        pre.put("type", "Metaspace");
        pre.put("replacement", "▁");
        pre.put("prepend_scheme", "always");
        pre.put("split", true);
        ObjectNode decoder = root.putObject("decoder");
        decoder.put("type", "Metaspace");
        decoder.put("replacement", "▁");
        decoder.put("prepend_scheme", "always");
        decoder.put("split", true);
        ObjectNode model = root.putObject("model");
        model.put("type", "WordLevel");
        model.put("unk_token", "<unk>");
        model.putObject("vocab").put("▁hello", 0).put("▁world", 1).put("<unk>", 2);
        return root;
    }

    private static void addSpecial(ArrayNode added, int id, String content) {
        ObjectNode token = added.addObject();
        token.put("id", id);
        token.put("content", content);
        token.put("single_word", false);
        token.put("lstrip", false);
        token.put("rstrip", false);
        token.put("normalized", false);
        token.put("special", true);
    }

    static ObjectNode chatmlConfig() {
        ObjectNode config = JSON.createObjectNode();
        config.put("bos_token", "<s>");
        // transformers also writes special tokens as serialized AddedToken objects.
        config.putObject("eos_token").put("content", "<|im_end|>").put("special", true);
        config.put("chat_template", CHATML_TEMPLATE);
        return config;
    }

    static void writeJson(Path dir, String name, Object json) {
        try {
            write(dir, name, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(json));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void write(Path dir, String name, String text) {
        try {
            Files.writeString(dir.resolve(name), text, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
