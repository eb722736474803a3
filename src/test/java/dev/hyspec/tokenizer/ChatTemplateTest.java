package dev.hyspec.tokenizer;

import static dev.hyspec.tokenizer.TestTokenizers.write;
import static dev.hyspec.tokenizer.TestTokenizers.writeJson;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatTemplateTest {
    private static final List<ChatMessage> CONVERSATION = List.of(
            new ChatMessage("system", "You are terse."),
            new ChatMessage("user", "héllo ✓"),
            new ChatMessage("assistant", "Hi."),
            new ChatMessage("user", "Bye?"));

    @TempDir
    Path dir;

    private static String render(String template, List<ChatMessage> messages) {
        return ChatTemplate.of(template, "<s>", "</s>").render(messages, false);
    }

    private static String render(String template) {
        return render(template, CONVERSATION);
    }

    @Test
    void rendersChatmlFromTokenizerConfig() {
        writeJson(dir, "tokenizer_config.json", TestTokenizers.chatmlConfig());
        ChatTemplate template = ChatTemplate.load(dir).orElseThrow();
        String conversation = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                + "<|im_start|>user\nhéllo ✓<|im_end|>\n"
                + "<|im_start|>assistant\nHi.<|im_end|>\n"
                + "<|im_start|>user\nBye?<|im_end|>\n";
        assertEquals(conversation, template.render(CONVERSATION, false));
        assertEquals(conversation + "<|im_start|>assistant\n", template.render(CONVERSATION, true));
    }

    @Test
    void bosAndEosTokensComeFromTheConfigAndAreUndefinedWithout() {
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.put("chat_template", "{{ bos_token }}|{{ eos_token }}|{{ bos_token is defined }}");
        writeJson(dir, "tokenizer_config.json", config);
        assertEquals("<s>|<|im_end|>|True", ChatTemplate.load(dir).orElseThrow().render(CONVERSATION, false));
        config.remove("bos_token");
        config.remove("eos_token");
        writeJson(dir, "tokenizer_config.json", config);
        assertEquals("||False", ChatTemplate.load(dir).orElseThrow().render(CONVERSATION, false));
    }

    @Test
    void trimBlocksAndLstripBlocksAsInTransformers() {
        String template = "{% for message in messages %}\n"
                + "    {% if message.role == 'user' %}\n"
                + "U: {{ message.content }}\n"
                + "    {% endif %}\n"
                + "{% endfor %}\n"
                + "{% if add_generation_prompt %}\n"
                + "A:\n"
                + "{% endif %}\n";
        ChatTemplate chat = ChatTemplate.of(template, null, null);
        assertEquals("U: héllo ✓\nU: Bye?\nA:\n", chat.render(CONVERSATION, true));
        // Jinja2 also drops the template's single trailing newline.
        assertEquals("U: héllo ✓\nU: Bye?\n", chat.render(CONVERSATION, false));
        assertEquals("a\n", ChatTemplate.of("a\n\n", null, null).render(CONVERSATION, false));
    }

    @Test
    void raiseExceptionSurfacesWithTheTemplatesMessage() {
        String template = "{% for message in messages %}"
                + "{% if (message['role'] == 'user') != (loop.index0 % 2 == 1) %}"
                + "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
                + "{% endif %}{{ message['content'] }}{% endfor %}";
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> render(template,
                List.of(new ChatMessage("system", "s"), new ChatMessage("user", "u"), new ChatMessage("user", "u"))));
        assertEquals("Conversation roles must alternate user/assistant/user/assistant/...", e.getMessage());
        assertEquals("sHi.", render(template, List.of(new ChatMessage("system", "s"), new ChatMessage("user", "Hi."))));
    }

    @Test
    void missingFilesOrTemplateGiveEmpty() {
        assertTrue(ChatTemplate.load(dir).isEmpty());
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.remove("chat_template");
        writeJson(dir, "tokenizer_config.json", config);
        assertTrue(ChatTemplate.load(dir).isEmpty());
        config.putNull("chat_template");
        writeJson(dir, "tokenizer_config.json", config);
        assertTrue(ChatTemplate.load(dir).isEmpty());
    }

    @Test
    void namedTemplatesPickDefault() {
        ObjectNode config = TestTokenizers.chatmlConfig();
        ArrayNode templates = config.putArray("chat_template");
        templates.addObject().put("name", "tool_use").put("template", "tools");
        templates.addObject().put("name", "default").put("template", "plain");
        writeJson(dir, "tokenizer_config.json", config);
        assertEquals("plain", ChatTemplate.load(dir).orElseThrow().render(CONVERSATION, false));
    }

    @Test
    void namedTemplatesWithoutDefaultNameTheFile() {
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.putArray("chat_template").addObject().put("name", "tool_use").put("template", "tools");
        writeJson(dir, "tokenizer_config.json", config);
        TokenizerException e = assertThrows(TokenizerException.class, () -> ChatTemplate.load(dir));
        assertEquals(dir.resolve("tokenizer_config.json")
                + ": \"chat_template\" lists named templates [tool_use] but none is named \"default\"", e.getMessage());
    }

    @Test
    void chatTemplateJinjaFileTakesPrecedence() {
        writeJson(dir, "tokenizer_config.json", TestTokenizers.chatmlConfig());
        write(dir, "chat_template.jinja", "{{ bos_token }}{{ messages | length }}\n");
        ChatTemplate template = ChatTemplate.load(dir).orElseThrow();
        assertEquals("<s>4", template.render(CONVERSATION, false));
        assertEquals(dir.resolve("chat_template.jinja").toString(), template.source());
    }

    @Test
    void malformedConfigNamesTheFile() {
        write(dir, "tokenizer_config.json", "{\"chat_template\": \"{{ x }}\"");
        TokenizerException e = assertThrows(TokenizerException.class, () -> ChatTemplate.load(dir));
        assertTrue(e.getMessage().startsWith(dir.resolve("tokenizer_config.json") + ": is not valid JSON"),
                e.getMessage());
    }

    @Test
    void chatTemplateOfTheWrongTypeNamesTheFile() {
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.put("chat_template", 3);
        writeJson(dir, "tokenizer_config.json", config);
        TokenizerException e = assertThrows(TokenizerException.class, () -> ChatTemplate.load(dir));
        assertTrue(e.getMessage().startsWith(dir.resolve("tokenizer_config.json") + ": \"chat_template\" must be"),
                e.getMessage());
    }

    @Test
    void brokenTemplateNamesItsSource() {
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.put("chat_template", "{% for message in messages %}{{ message.content }}{% nosuchtag %}{% endfor %}");
        writeJson(dir, "tokenizer_config.json", config);
        ChatTemplate template = ChatTemplate.load(dir).orElseThrow();
        TokenizerException e = assertThrows(TokenizerException.class, () -> template.render(CONVERSATION, false));
        assertTrue(e.getMessage().startsWith(dir.resolve("tokenizer_config.json") + " (chat_template): "),
                e.getMessage());
        assertTrue(e.getMessage().contains("nosuchtag"), e.getMessage());
    }

    @Test
    void pythonStringMethods() {
        assertEquals("x|x |  x|x", render("{{ '  x '.strip() }}|{{ '  x '.lstrip() }}|{{ '  x'.rstrip() }}|"
                + "{{ '\\n\\nx\\n'.strip('\\n') }}"));
        assertEquals("True|False|True|True", render("{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('b') }}|"
                + "{{ 'abc'.endswith(('x', 'c')) }}|{{ messages[1].content.startswith('h') }}"));
        assertEquals("['a', 'b,c']|['a', 'b', 'c']|['', 'a', '']",
                render("{{ 'a,b,c'.split(',', 1) }}|{{ ' a  b\\tc '.split() }}|{{ ',a,'.split(',') }}"));
        assertEquals("ABC|abc|Hello World'S|Hello world|xab|a-b",
                render("{{ 'aBc'.upper() }}|{{ 'aBc'.lower() }}|{{ 'hello world\\'s'.title() }}|"
                        + "{{ 'hELLO WORLD'.capitalize() }}|{{ 'aab'.replace('a', 'b', 1).replace('b', 'x', 1) }}|"
                        + "{{ '-'.join(['a', 'b']) }}"));
    }

    @Test
    void pythonIndexingSlicingAndKeywordArguments() {
        assertEquals("c|a||cba|ca|[3, 2, 1]|[2]|Bye?", render("{{ 'abc'[-1] }}|{{ 'abc'[0] }}|{{ 'abc'[5] }}|"
                + "{{ 'abc'[::-1] }}|{{ 'abc'[::-2] }}|{{ [1, 2, 3][::-1] }}|{{ [1, 2, 3][1:2:1] }}|"
                + "{{ messages[-1].content }}"));
        // As Qwen3's template finds the last user turn.
        String lastUserQuery = "{%- set ns = namespace(last=messages|length - 1) %}"
                + "{%- for message in messages[::-1] %}"
                + "{%- set index = (messages|length - 1) - loop.index0 %}"
                + "{%- if message.role == 'assistant' and ns.last == messages|length - 1 %}"
                + "{%- set ns.last = index %}"
                + "{%- endif %}"
                + "{%- endfor %}"
                + "{{ ns.last }}";
        assertEquals("2", render(lastUserQuery));
        assertEquals("user,assistant", render("{{ messages[1:3] | map(attribute='role') | join(',') }}"));
    }

    @Test
    void reasoningSplitAsQwen3Does() {
        String template = "{%- for message in messages %}"
                + "{%- set content = message.content %}"
                + "{%- if '</think>' in content %}"
                + "{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
                + "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
                + "[{{ reasoning }}]"
                + "{%- endif %}"
                + "{{ content }}"
                + "{%- endfor %}";
        assertEquals("[hmm]answer",
                render(template, List.of(new ChatMessage("assistant", "<think>\nhmm\n</think>\n\nanswer"))));
    }

    @Test
    void generationBlocksRenderTheirContents() {
        assertEquals("<a>Hi.</a>", render("{% for m in messages %}{% if m.role == 'assistant' %}"
                + "<a>{% generation %}{{ m.content }}{% endgeneration %}</a>{% endif %}{% endfor %}"));
    }

    @Test
    void strftimeNowFormatsTheCurrentLocalDate() {
        long noon = LocalDateTime.of(2024, 7, 26, 12, 0).atZone(ZoneId.systemDefault()).toInstant().toEpochMilli();
        ChatTemplate template = ChatTemplate.of("Today Date: {{ strftime_now('%d %b %Y') }}", null, null, () -> noon);
        assertEquals("Today Date: 26 Jul 2024", template.render(CONVERSATION, false));
    }

    @Test
    void nullContentIsAllowed() {
        assertEquals("assistant:True:False", render(
                "{% for m in messages %}{{ m.role }}:{{ m.content is none }}:{{ m.content is string }}{% endfor %}",
                List.of(new ChatMessage("assistant", null))));
    }
}
